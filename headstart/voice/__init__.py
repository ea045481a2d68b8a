"""The listening stage: audio frames in; speech start/end, partial/final transcripts, end of turn out.

vad.py (Silero v6 / WebRTC + hysteresis), agreement.py (LocalAgreement-n), endpoint.py (end of turn),
asr.py (faster-whisper adapter), words.py (timed words), listener.py (the async composition).
Policies are synchronous and pure; only listener.py knows asyncio. Nothing heavy is imported here.
"""
