"""Checks of a prepared model that need a pipeline stage to run it (`headstart models prepare` passes
`check_prepared` to `headstart.models.prepare.prepare`; models.py itself, a shared module, imports no stage).
"""

from __future__ import annotations

from pathlib import Path

from headstart.config import ASRConfig

__all__ = ["check_prepared", "check_transcripts"]


def check_prepared(name: str, folder: Path) -> str | None:
    """What is wrong with the freshly converted model `name` in `folder`, or None (also for a model
    that has no check here)."""
    if name == "moonshine-base":
        return check_transcripts(folder)
    return None


# `headstart models prepare` checks a converted model on these packaged recordings (clear speech, 3-5 s)
CHECK_RECORDINGS = ("goforward", "librivox-0880", "ss-noservice")
CHECK_MAX_WER = 0.1  # Moonshine base: 1 error in 27 words ("metres" for "meters"); a broken model: most


def check_transcripts(model_path: str | Path) -> str | None:
    """Transcribe `CHECK_RECORDINGS` with the model in `model_path` (one thread) and compare them with
    their reference texts.

    Returns:
        None when the corpus WER is at most `CHECK_MAX_WER`, else what went wrong (the transcripts).
    """
    from headstart.corpus.recordings import recording
    from headstart.corpus.wer import corpus_word_error_rate
    from headstart.voice.moonshine import MoonshineASR

    try:
        asr = MoonshineASR(model_path, ASRConfig(), cpu_threads=1)
    except Exception as exc:  # noqa: BLE001 - any load failure means the converted files are unusable
        return f"the model does not load: {type(exc).__name__}: {exc}"
    pairs = []
    for name in CHECK_RECORDINGS:
        rec = recording(name)
        pairs.append((rec.text, asr.transcribe(rec.read()).text))
    wer = corpus_word_error_rate(pairs)
    if wer > CHECK_MAX_WER:
        return f"WER {wer:.1%} > {CHECK_MAX_WER:.0%} on {', '.join(CHECK_RECORDINGS)}: {[p[1] for p in pairs]}"
    return None
