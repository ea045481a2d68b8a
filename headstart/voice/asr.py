"""faster-whisper adapter: one blocking call turns an utterance's audio into timed words.

The call materialises faster-whisper's lazy segment generator itself, so it can run whole on the ASR
executor. It transcribes with word timestamps, greedy or beam search from `ASRConfig`, no temperature
fallback, no previous-text conditioning and no built-in VAD (speech is gated upstream), then drops
segments that are not speech: Whisper's own no-speech rule (no_speech_prob above the threshold *and*
a low average log-probability) and the phrases Whisper is known to invent from silence and noise
("Thanks for watching!", "Subtitles by ...", a lone "you"). A repetition loop (zero-length words,
times going back, a high compression ratio, the decoding budget reached) is cut where it begins and
only the loop is dropped (`_keep_words`).
"""

from __future__ import annotations

import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioError
from headstart.config import ASRConfig
from headstart.seams import ListeningDefaults  # noqa: F401 (re-exported: the engines' streaming settings)
from headstart.voice.agreement import _MAX_LOOP_PERIOD_WORDS, find_loop
from headstart.voice.words import Word, join_words

# Segments Whisper writes from silence/noise, learnt from subtitled video (always dropped).
_ALWAYS_HALLUCINATED = re.compile(
    r"thanks? (you )?for watching|subtitles? by|captions? by|subscribe|amara\.org|transcribed by"
    r"|transcription by|www\.|\.com\b",
    re.IGNORECASE,
)
# A segment made only of bracketed tags or music notes: "[Music]", "(upbeat music)", "♪ ♪", "[BLANK_AUDIO]".
_ONLY_TAGS = re.compile(r"^\s*(?:(?:\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|[♪♫#\-.…\s]))*\s*$")
# Short phrases that are real speech when heard clearly but a classic hallucination otherwise:
# dropped when the segment is at all doubtful.
_DOUBTFUL_PHRASES = frozenset(
    {"you", "thank you", "thanks", "thank you very much", "bye", "bye bye", "okay", "oh", "so", "uh", "um",
     "hmm", "mm", "i'm sorry", "the end", "yeah"}
)
_DOUBTFUL_NO_SPEECH = 0.2
_DOUBTFUL_LOG_PROB = -0.7
_NON_WORD = re.compile(r"[^\w' ]+")
_FULL_WINDOW_FRAMES = 3000  # Whisper's 30 s window, 100 mel frames per second
_SAMPLES_PER_FRAME = 160
_WINDOW_MARGIN_FRAMES = 200  # silence the encoder sees after the audio (2 s)
# Decoding budget per call: speech is at most ~6 tokens/s (words, punctuation, timestamps); a call on
# a short clip can fall into a repetition loop ("Press Press Press ...", measured: 0.3 s of audio, 3.3 s
# CPU) that the compression-ratio check drops anyway, so it may not decode more than this
_TOKENS_BASE = 10
_TOKENS_PER_S = 10.0
_TOKENS_MAX = 220  # + prompt (<= ~60 tokens) + start sequence stays under Whisper's 448


@dataclass(frozen=True, slots=True)
class Transcription:
    """The result of one ASR call.

    Attributes:
        words: the kept words with stream times (seconds; the call's `offset_s` added).
        text: the words joined with the recogniser's spacing ("" when nothing was heard).
        no_speech_prob: the highest no-speech probability among the model's segments (1.0 when the
            model produced none or was not called).
        avg_logprob: the mean token log-probability of the kept segments (0.0 when none).
        audio_s: the length of the transcribed audio (seconds).
        compute_s: wall time of the call (seconds; 0.0 when the model was not called).
        dropped: the texts of segments dropped as non-speech, for logs and tests.
    """

    words: tuple[Word, ...]
    text: str
    no_speech_prob: float
    avg_logprob: float
    audio_s: float
    compute_s: float = 0.0
    dropped: tuple[str, ...] = ()


def segment_drop_reason(segment: Any, config: ASRConfig) -> str | None:
    """Why a faster-whisper segment is not speech, or None to keep it.

    Args:
        segment: anything with `text`, `no_speech_prob`, `avg_logprob`, `compression_ratio`.
    """
    text = segment.text.strip()
    if not text or _ONLY_TAGS.match(text):
        return "no words"
    if segment.no_speech_prob > config.no_speech_threshold and segment.avg_logprob < config.log_prob_threshold:
        return "no speech"
    if segment.compression_ratio > config.compression_ratio_threshold:
        return "repetition"
    words = _NON_WORD.sub(" ", text.lower()).split()
    if len(words) >= 4 and len(set(words)) * 3 <= len(words):  # "press press press press"
        return "repetition"
    if _ALWAYS_HALLUCINATED.search(text):
        return "known hallucination"
    phrase = " ".join(_NON_WORD.sub(" ", text.lower()).split())
    if phrase in _DOUBTFUL_PHRASES and (
        segment.no_speech_prob >= _DOUBTFUL_NO_SPEECH or segment.avg_logprob < _DOUBTFUL_LOG_PROB
    ):
        return "doubtful short phrase"
    return None


def _compression_ratio(text: str) -> float:
    """Whisper's repetition measure: UTF-8 bytes over zlib-compressed bytes."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def _is_repetitive(text: str, config: ASRConfig) -> bool:
    words = _NON_WORD.sub(" ", text.lower()).split()
    return _compression_ratio(text.strip()) > config.compression_ratio_threshold or (
        len(words) >= 4 and len(set(words)) * 3 <= len(words)  # "press press press press"
    )


def _repeated_tail(words: list[Word]) -> tuple[int, int] | None:
    """Where a segment's text starts to repeat itself up to its end, keeping one copy of the phrase
    ("a b c d. c d. c d. c" -> "a b c d.": (4, 2)), and the phrase's length in words; None when
    its end does not repeat a phrase twice. For a segment already judged a loop (compression
    ratio, decoding budget) whose word times show no loop (`find_loop`)."""
    keys = [w.key for w in words]
    n = len(keys)
    best = None
    for p in range(1, _MAX_LOOP_PERIOD_WORDS + 1):
        start = n - p
        while start > 0 and keys[start - 1] == keys[start - 1 + p]:
            start -= 1
        if n - start >= 2 * p and (best is None or start + p < best[0]):
            best = (start + p, p)
    return best


def _keep_words(
    segments: list, config: ASRConfig, offset_s: float, cut_short: bool
) -> tuple[list[Word], list[str], list[float]]:
    """The words of a call's segments that are speech: (words, dropped texts, kept segments'
    average log-probabilities). A repetition loop is cut where it begins (`find_loop` over the
    whole hypothesis, else `_repeated_tail` in a segment judged a loop), and only the loop is
    dropped, so real words before it stay. Unless the call heard nothing but one copy of the
    looped phrase while the model doubts it heard speech (no_speech_prob >= `_DOUBTFUL_NO_SPEECH`):
    then the segment is dropped whole (a short clip's "Press Press Press", noise's "I'm going to go
    to go to")."""
    dropped: list[str] = []
    candidates: list[tuple[Any, list[Word], bool]] = []  # (segment, its words, judged a loop)
    for k, segment in enumerate(segments):
        reason = segment_drop_reason(segment, config)
        looping = reason == "repetition" or (cut_short and k == len(segments) - 1)
        if reason is not None and reason != "repetition":
            dropped.append(segment.text.strip())
            continue
        seg_words = [
            Word(w.word, offset_s + float(w.start), offset_s + float(w.end), float(w.probability))
            for w in segment.words or ()
            if w.word.strip()
        ]
        candidates.append((segment, seg_words, looping))
    cut, phrase = find_loop([w for _, seg_words, _ in candidates for w in seg_words])
    words: list[Word] = []
    kept_logprobs: list[float] = []
    seen = 0  # words of the hypothesis before this segment
    for index, (segment, seg_words, looping) in enumerate(candidates):
        keep = max(min(cut - seen, len(seg_words)), 0)
        seen += len(seg_words)
        if looping and keep == len(seg_words):  # judged a loop, but its times do not show where
            keep, phrase = _repeated_tail(seg_words) or (0, 0)
        loop_found = keep < len(seg_words)
        kept = seg_words[:keep]
        only_the_loop = loop_found and len(words) + len(kept) <= max(phrase, 1)
        if kept and (
            _is_repetitive(join_words(kept), config)
            or (only_the_loop and segment.no_speech_prob >= _DOUBTFUL_NO_SPEECH)
        ):
            kept = []
        if len(kept) < len(seg_words):
            dropped.append(join_words(seg_words[len(kept):]) if kept else segment.text.strip())
        if kept:
            kept_logprobs.append(segment.avg_logprob)
            words.extend(kept)
        if loop_found:  # after a loop nothing the decoder wrote is trusted
            dropped.extend(later.text.strip() for later, _, _ in candidates[index + 1 :])
            break
    return words, dropped, kept_logprobs


def _check_audio(samples: np.ndarray) -> None:
    if not isinstance(samples, np.ndarray) or samples.dtype != np.float32 or samples.ndim != 1:
        raise AudioError(
            "WhisperASR.transcribe expects a float32 array of shape (num_samples,) at 16 kHz, got "
            f"{type(samples).__name__} {getattr(samples, 'dtype', '')} {getattr(samples, 'shape', '')}"
        )
    if not np.isfinite(samples).all():
        raise AudioError("audio contains NaN or infinite samples")


class WhisperASR:
    """Batch Whisper transcription of one utterance at a time (faster-whisper / CTranslate2).

    Args:
        model_path: a folder holding a CTranslate2 Whisper model (model.bin, config.json, tokenizer).
        config: decoding and filtering settings.
        cpu_threads: CTranslate2 intra-op threads (from ThreadPlan.asr_threads).

    Raises:
        FileNotFoundError: if the folder or its model.bin is missing.
        ValueError: if cpu_threads < 1.
    """

    listening = ListeningDefaults()  # whisper's streaming settings are the defaults

    # a pass costs about the same at any length (the encoder window); the measurements behind the final
    # slack are in docs/listening.md ("final_slack_s")
    listening = ListeningDefaults()

    def __init__(self, model_path: str | Path, config: ASRConfig, cpu_threads: int) -> None:
        path = Path(model_path).expanduser()
        if not (path / "model.bin").is_file():
            raise FileNotFoundError(
                f"no CTranslate2 Whisper model in {path} (expected {path / 'model.bin'}); "
                "run `headstart models prepare whisper-tiny.en` or pass a model folder"
            )
        if cpu_threads < 1:
            raise ValueError(f"cpu_threads must be >= 1, got {cpu_threads}")
        window = config.encoder_window_s
        if window is not None and not 0 < window <= 30:
            raise ValueError(f"ASRConfig.encoder_window_s must be in (0, 30] or None, got {window}")

        self.config = config
        self.model_path = path
        self._encoder_frames = _FULL_WINDOW_FRAMES
        self._model = _windowed_model_class()(
            str(path),
            device=config.device,
            compute_type=config.compute_type,
            cpu_threads=cpu_threads,
            num_workers=1,
            local_files_only=True,
        )
        self._model.headstart_asr = self

    @classmethod
    def load(cls, config: ASRConfig, cpu_threads: int) -> WhisperASR:
        """Load `config.model` (a preset name, folder or prepared hub id) via the model catalogue.

        Raises:
            headstart.models.store.ModelNotPreparedError: a preset that is not prepared (names the command).
        """
        from headstart.models.store import resolve_model

        return cls(resolve_model(config.model), config, cpu_threads)

    def warmup(self) -> None:
        """Run one call on a second of faint noise: the first call pays one-time set-up costs."""
        noise = np.random.default_rng(0).standard_normal(SAMPLE_RATE_HZ).astype(np.float32) * 1e-3
        self._run(noise)

    def transcribe(self, samples: np.ndarray, offset_s: float = 0.0, prompt: str | None = None) -> Transcription:
        """Transcribe one utterance. Blocking: call it from the ASR executor. The encoder over
        `ASRConfig.encoder_window_s` is most of the cost, whatever the utterance's length
        (docs/listening.md "Cost of a Whisper call").

        Args:
            samples: float32 (num_samples,) at 16 kHz, at most 30 s (one Whisper window).
            offset_s: the stream time of samples[0]; added to every word time.
            prompt: text said just before `samples` (Whisper's previous-text prompt), e.g. the
                committed text of a long utterance whose audio buffer was trimmed; None: no prompt.

        Returns:
            A Transcription; empty (the model not called) for empty or all-zero audio.

        Raises:
            AudioError: on another dtype or shape, or NaN/inf samples.
        """
        _check_audio(samples)
        audio_s = samples.shape[0] / SAMPLE_RATE_HZ
        if samples.size == 0 or not samples.any():
            return Transcription((), "", 1.0, 0.0, audio_s)
        started = time.perf_counter()
        segments = self._run(samples, prompt)
        if prompt and not segments:
            # tiny.en may end at once after some prompts (a long utterance's committed text "to
            # decrease your speaking volume ... to increase your speaking volume ..." gave no segment
            # for 6.8-8 s of speech, and the listener ended the turn as wordless): the audio without it
            segments = self._run(samples)
        compute_s = time.perf_counter() - started
        budget = max_new_tokens(samples.shape[0])
        # the decoder ran out of its budget: the last segment is a repetition loop cut short
        cut_short = bool(segments) and sum(len(getattr(seg, "tokens", ()) or ()) for seg in segments) >= budget
        words, dropped, kept_logprobs = _keep_words(segments, self.config, offset_s, cut_short)
        no_speech = max((s.no_speech_prob for s in segments), default=1.0)
        return Transcription(
            words=tuple(words),
            text=join_words(words),
            no_speech_prob=float(no_speech),
            avg_logprob=float(np.mean(kept_logprobs)) if kept_logprobs else 0.0,
            audio_s=audio_s,
            compute_s=compute_s,
            dropped=tuple(dropped),
        )

    def encoder_frames(self, num_samples: int) -> int:
        """Mel frames (100 per second) the encoder sees for `num_samples` of audio: the audio + 2 s,
        rounded up to whole seconds, at least `encoder_window_s`, at most Whisper's 30 s."""
        window = self.config.encoder_window_s
        if window is None:
            return _FULL_WINDOW_FRAMES
        frames = -(-num_samples // _SAMPLES_PER_FRAME) + _WINDOW_MARGIN_FRAMES
        frames = max(-(-frames // 100) * 100, int(round(window * 100)))
        return min(frames, _FULL_WINDOW_FRAMES)

    def _run(self, samples: np.ndarray, prompt: str | None = None) -> list:
        cfg = self.config
        self._encoder_frames = self.encoder_frames(samples.shape[0])
        segments, _info = self._model.transcribe(
            samples,
            language=cfg.language,
            beam_size=cfg.beam_size,
            temperature=0.0,
            word_timestamps=True,
            vad_filter=False,
            condition_on_previous_text=False,
            initial_prompt=prompt or None,
            max_new_tokens=max_new_tokens(samples.shape[0]),
            # filtering is ours (segment_drop_reason); faster-whisper's would re-decode at higher temperature
            compression_ratio_threshold=None,
            log_prob_threshold=None,
            no_speech_threshold=None,
        )
        return list(segments)  # materialise the lazy generator here, inside the executor


def max_new_tokens(num_samples: int) -> int:
    """The decoding budget of one call on `num_samples` of 16 kHz audio (see `_TOKENS_PER_S`)."""
    return min(int(_TOKENS_BASE + _TOKENS_PER_S * num_samples / SAMPLE_RATE_HZ), _TOKENS_MAX)


def _windowed_model_class():
    """faster_whisper.WhisperModel whose encoder sees only the first `WhisperASR.encoder_frames` of the
    30 s window faster-whisper pads every call to (imported lazily).

    Whisper's encoder cost grows faster than linearly with its input (attention), and on this AVX2 CPU it
    is ~90 % of a call over the full window. CTranslate2 runs the encoder on a shorter mel input (its
    positional embedding is sliced); the decoder cross-attends to fewer frames. The same trick as
    whisper.cpp's `audio_ctx`. Too short a window (< ~12 s for tiny.en) makes the decoder loop.
    """
    global _WINDOWED_MODEL
    if _WINDOWED_MODEL is None:
        from faster_whisper import WhisperModel

        class _WindowedWhisperModel(WhisperModel):
            headstart_asr: WhisperASR | None = None

            def encode(self, features: np.ndarray):
                owner = self.headstart_asr
                if owner is not None and features.shape[-1] > owner._encoder_frames:
                    features = np.ascontiguousarray(features[..., : owner._encoder_frames])
                return super().encode(features)

        _WINDOWED_MODEL = _WindowedWhisperModel
    return _WINDOWED_MODEL


_WINDOWED_MODEL = None
