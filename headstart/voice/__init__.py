"""The listening stage: audio frames in; speech start/end, partial/final transcripts, end of turn out.

vad.py (Silero v6 / WebRTC + hysteresis), agreement.py (LocalAgreement-n), endpoint.py (end of turn),
asr.py (faster-whisper adapter), words.py (timed words), listener.py (the async composition) with its
parts: stream_audio.py, utterance.py, pass_cadence.py (when ASR passes run) and turn_scoring.py (the
EOU and acoustic scores fed into the endpointer). Policies are synchronous and pure; only listener.py
and turn_scoring.py know asyncio. Nothing heavy is imported here.
"""
