"""Ask back instead of answering words nobody said: a final transcript the recogniser was unsure of gets
"Sorry, could you say that again?" rather than a confident answer to a misheard question.

A plain synchronous policy. The signal is the recogniser's own confidence in the final pass: the mean
of its word probabilities (`FinalTranscript.confidence`, headstart/voice/words.py `mean_probability`).
How the default threshold was chosen (clean and garbled turns, the recogniser's transcripts and
confidences side by side): docs/listening.md "Asking back".
"""

from __future__ import annotations

from headstart.llm.canned import ASK_BACK_TEXT
from headstart.session.turntaking import has_words

__all__ = ["ASK_BACK_TEXT", "asks_back"]


def asks_back(confidence: float | None, text: str, below: float | None) -> bool:
    """Whether the turn `text`, transcribed with mean word probability `confidence` (in [0, 1]; None:
    unknown), gets the ask-back reply: only when the confidence is known and under `below`
    (`SessionConfig.ask_back_below`; None: never) and the text has words."""
    return below is not None and confidence is not None and confidence < below and has_words(text)
