"""Moonshine base (English) with onnxruntime: one blocking call turns an utterance's audio into words.

The model folder is what `headstart models prepare moonshine-base` makes (headstart/models/,
headstart/models/ort_convert.py): `encoder_model.onnx` (raw 16 kHz audio (1, num_samples) ->
`last_hidden_state` (1, frames, 416)), `decoder_model_merged.onnx` (one token at a time, with its
self-attention KV cache and the cross-attention KV cache computed at the first step) and
`tokenizer.bin` (the vocabulary: 32,000 entries, each a length byte and that many UTF-8 bytes,
SentencePiece's "\u2581" for a space, ids 3-258 the bytes 0x00-0xff).

Decoding is greedy from <s> (id 1) to </s> (id 2), at most `moonshine_max_tokens(num_samples)` tokens.
Moonshine is not streaming and has no timestamps or text prompt: every call transcribes the whole
buffer; word times are estimated (the voiced span found from the audio's energy, shared among the
words by their length), and `prompt` is accepted and ignored. The guards that keep Whisper's
inventions out apply here too (`headstart.voice.asr.segment_drop_reason` on the one hypothesis),
with the probability of </s> as the first token standing in for Whisper's no-speech probability. A
hypothesis that runs out of its token budget is a repetition loop: it is cut where its tail starts to
repeat a phrase (one copy kept), or dropped whole when no repeated phrase is found.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioError
from headstart.config import ASRConfig
from headstart.voice.asr import ListeningDefaults, Transcription, segment_drop_reason
from headstart.voice.words import Word, join_words, normalize_word

ENCODER_FILE = "encoder_model.onnx"
DECODER_FILE = "decoder_model_merged.onnx"
TOKENIZER_FILE = "tokenizer.bin"

_BOS, _EOS = 1, 2
_FIRST_BYTE_TOKEN = 3  # ids 3..258 are the bytes 0x00..0xff (SentencePiece byte fallback)
_SPACE = "\u2581"
# Decoding budget per call: English speech is at most ~4 words (~5-6 tokens) per second; more means a
# loop. The encoder needs some audio: shorter input is padded with zeros to this.
_TOKENS_BASE = 6
_TOKENS_PER_S = 8.0
_TOKENS_MAX = 400
_MIN_SAMPLES = SAMPLE_RATE_HZ // 4
# word-time estimate: 20 ms energy frames; voiced = RMS at least this fraction of the loudest frame
_FRAME_SAMPLES = 320
_VOICED_FRACTION = 0.1
_MIN_WORD_S = 0.06
_MAX_LOOP_PERIOD_WORDS = 8  # the longest phrase a loop repeats that is looked for


@dataclass(frozen=True, slots=True)
class _Hypothesis:
    """One decoded utterance, shaped like a faster-whisper segment for `segment_drop_reason`."""

    text: str
    no_speech_prob: float
    avg_logprob: float
    compression_ratio: float


def read_tokenizer(path: str | Path) -> list[bytes]:
    """The vocabulary in `tokenizer.bin`: entry i is token i's bytes (UTF-8, "\u2581" for a space).

    Format: entries back to back, each a length (unsigned LEB128: one byte below 128) and that many bytes.

    Raises:
        ValueError: a truncated or empty file.
    """
    data = Path(path).read_bytes()
    tokens: list[bytes] = []
    i = 0
    while i < len(data):
        length, shift = 0, 0
        while True:
            if i >= len(data):
                raise ValueError(f"{path}: truncated length at byte {i}")
            byte = data[i]
            i += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if i + length > len(data):
            raise ValueError(f"{path}: token {len(tokens)} runs past the end of the file")
        tokens.append(data[i : i + length])
        i += length
    if len(tokens) <= _FIRST_BYTE_TOKEN + 255:
        raise ValueError(f"{path}: {len(tokens)} tokens is not a Moonshine vocabulary")
    return tokens


def moonshine_max_tokens(num_samples: int) -> int:
    """The decoding budget of one call on `num_samples` of 16 kHz audio (see `_TOKENS_PER_S`)."""
    return min(int(_TOKENS_BASE + _TOKENS_PER_S * num_samples / SAMPLE_RATE_HZ), _TOKENS_MAX)


def loop_cut(keys: list[str]) -> int | None:
    """Where a hypothesis' tail starts to repeat a phrase of at most `_MAX_LOOP_PERIOD_WORDS` words at
    least twice up to its end, keeping one copy ("a b c d c d c" -> 4); None when it does not.

    Args:
        keys: the words, normalised (`headstart.voice.words.normalize_word`).
    """
    n = len(keys)
    best = None
    for period in range(1, _MAX_LOOP_PERIOD_WORDS + 1):
        start = n - period
        while start > 0 and keys[start - 1] == keys[start - 1 + period]:
            start -= 1
        if n - start >= 2 * period and (best is None or start + period < best):
            best = start + period
    return best


def is_moonshine_folder(path: str | Path) -> bool:
    """Whether `path` is a folder holding a prepared Moonshine model (its three files)."""
    folder = Path(path)
    return all((folder / name).is_file() for name in (ENCODER_FILE, DECODER_FILE, TOKENIZER_FILE))


def _check_audio(samples: np.ndarray) -> None:
    if not isinstance(samples, np.ndarray) or samples.dtype != np.float32 or samples.ndim != 1:
        raise AudioError(
            "MoonshineASR.transcribe expects a float32 array of shape (num_samples,) at 16 kHz, got "
            f"{type(samples).__name__} {getattr(samples, 'dtype', '')} {getattr(samples, 'shape', '')}"
        )
    if not np.isfinite(samples).all():
        raise AudioError("audio contains NaN or infinite samples")


def _compression_ratio(text: str) -> float:
    raw = text.encode("utf-8")
    return len(raw) / len(zlib.compress(raw)) if raw else 0.0


class MoonshineASR:
    """Batch Moonshine transcription of one utterance at a time (onnxruntime, CPU).

    Args:
        model_path: a folder made by `headstart models prepare moonshine-base` (see the module doc).
        config: the filtering thresholds (`no_speech_threshold`, `log_prob_threshold`,
            `compression_ratio_threshold`); Whisper's decoding settings do not apply.
        cpu_threads: onnxruntime intra-op threads (from ThreadPlan.asr_threads).

    Raises:
        FileNotFoundError: a file of the model is missing.
        ValueError: cpu_threads < 1, or the files are not a Moonshine model (wrong inputs/outputs).
    """

    # A pass costs ~30 ms per second of audio: frequent partials while the utterance is short, spaced out
    # in proportion past 2 s (the VAD's pauses still start one); three passes must agree before a word is
    # committed (two commit its guesses on under a second of audio). The final is a pass that heard 0.05 s
    # past the VAD's last voiced window (Moonshine loses the last word on audio that stops at the speech
    # end), and its own hypothesis. The measurements behind each value: docs/listening.md ("Moonshine:
    # its end of turn, its partial cadence and its final pass").
    listening = ListeningDefaults(
        partial_interval_s=0.2, partial_long_s=2.0, final_slack_s=0.05, final_redecode=True, agreement_n=3
    )

    def __init__(self, model_path: str | Path, config: ASRConfig, cpu_threads: int) -> None:
        path = Path(model_path).expanduser()
        for name in (ENCODER_FILE, DECODER_FILE, TOKENIZER_FILE):
            if not (path / name).is_file():
                raise FileNotFoundError(
                    f"no Moonshine model in {path} (expected {path / name}); "
                    "run `headstart models prepare moonshine-base` or pass a model folder"
                )
        if cpu_threads < 1:
            raise ValueError(f"cpu_threads must be >= 1, got {cpu_threads}")
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = cpu_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self.config = config
        self.model_path = path
        self._encoder = ort.InferenceSession(str(path / ENCODER_FILE), options, providers=["CPUExecutionProvider"])
        self._decoder = ort.InferenceSession(str(path / DECODER_FILE), options, providers=["CPUExecutionProvider"])
        self._tokens = read_tokenizer(path / TOKENIZER_FILE)
        inputs = {i.name: i for i in self._decoder.get_inputs()}
        self._past_names = [n for n in inputs if n.startswith("past_key_values.")]
        self._output_names = [o.name for o in self._decoder.get_outputs()]
        needed = {"input_ids", "encoder_hidden_states", "use_cache_branch"}
        if not needed <= inputs.keys() or not self._past_names or self._output_names[0] != "logits":
            raise ValueError(f"{path / DECODER_FILE} is not a Moonshine merged decoder (inputs {sorted(inputs)})")
        if [i.name for i in self._encoder.get_inputs()] != ["input_values"]:
            raise ValueError(f"{path / ENCODER_FILE} is not a Moonshine encoder")
        shape = inputs[self._past_names[0]].shape  # (batch, heads, past_len, head_dim)
        self._empty_past = np.zeros((1, int(shape[1]), 0, int(shape[3])), dtype=np.float32)
        self._vocab = len(self._tokens)

    @classmethod
    def load(cls, config: ASRConfig, cpu_threads: int) -> MoonshineASR:
        """Load `config.model` (a preset name or a folder) via the model catalogue.

        Raises:
            headstart.models.store.ModelNotPreparedError: a preset that is not prepared (names the command).
        """
        from headstart.models.store import resolve_model

        return cls(resolve_model(config.model), config, cpu_threads)

    def warmup(self) -> None:
        """Run one call on a second of faint noise: the first call pays one-time set-up costs."""
        noise = np.random.default_rng(0).standard_normal(SAMPLE_RATE_HZ).astype(np.float32) * 1e-3
        self.decode_tokens(noise)

    def transcribe(self, samples: np.ndarray, offset_s: float = 0.0, prompt: str | None = None) -> Transcription:
        """Transcribe one utterance. Blocking: call it from the ASR executor. The cost grows with the
        audio length (encoder and tokens); docs/listening.md has the measured figures.

        Args:
            samples: float32 (num_samples,) at 16 kHz.
            offset_s: the stream time of samples[0]; added to every word time.
            prompt: ignored (Moonshine takes no text prompt); accepted for the listener's interface.

        Returns:
            A Transcription; empty (the model not called) for empty or all-zero audio. Word times are
            estimates (see the module doc); `no_speech_prob` is P(</s> first).

        Raises:
            AudioError: on another dtype or shape, or NaN/inf samples.
        """
        del prompt
        _check_audio(samples)
        audio_s = samples.shape[0] / SAMPLE_RATE_HZ
        if samples.size == 0 or not samples.any():
            return Transcription((), "", 1.0, 0.0, audio_s)
        started = time.perf_counter()
        ids, logprobs, eos_first, finished = self.decode_tokens(samples)
        compute_s = time.perf_counter() - started
        pieces = self._word_pieces(ids, logprobs)
        dropped: list[str] = []
        if not finished:  # out of its token budget: a loop; keep what came before it, if anything
            cut = loop_cut([normalize_word(text) for text, _ in pieces])
            dropped.append("".join(p[0] for p in pieces[cut or 0 :]).strip())
            pieces = pieces[:cut] if cut else []
        text = "".join(p[0] for p in pieces).strip()
        avg_logprob = float(np.mean(logprobs)) if logprobs else 0.0
        hypothesis = _Hypothesis(text, eos_first, avg_logprob, _compression_ratio(text))
        if not text or segment_drop_reason(hypothesis, self.config) is not None:
            dropped += [text] if text else []
            return Transcription((), "", eos_first, 0.0, audio_s, compute_s, tuple(dropped))
        words = self._timed_words(pieces, samples, offset_s)
        return Transcription(
            words=tuple(words),
            text=join_words(words),
            no_speech_prob=eos_first,
            avg_logprob=avg_logprob,
            audio_s=audio_s,
            compute_s=compute_s,
            dropped=tuple(dropped),
        )

    def decode_tokens(self, samples: np.ndarray) -> tuple[list[int], list[float], float, bool]:
        """Greedy decoding of `samples` (float32 (num_samples,), 16 kHz, checked by the caller).

        Returns:
            (token ids without <s>/</s>, their log-probabilities, P(</s> as the first token),
            whether </s> came within the budget).
        """
        audio = samples
        if audio.shape[0] < _MIN_SAMPLES:
            audio = np.concatenate([audio, np.zeros(_MIN_SAMPLES - audio.shape[0], dtype=np.float32)])
        hidden = self._encoder.run(None, {"input_values": audio[None, :]})[0]
        past = {name: self._empty_past for name in self._past_names}
        ids: list[int] = []
        logprobs: list[float] = []
        eos_first = 0.0
        token = _BOS
        budget = moonshine_max_tokens(samples.shape[0])
        for step in range(budget + 1):
            outputs = self._decoder.run(
                None,
                {
                    "input_ids": np.array([[token]], dtype=np.int64),
                    "encoder_hidden_states": hidden,
                    "use_cache_branch": np.array([step > 0]),
                    **past,
                },
            )
            logits = outputs[0][0, -1, : self._vocab].astype(np.float64)
            logits -= logits.max()
            log_z = np.log(np.exp(logits).sum())
            token = int(logits.argmax())
            if step == 0:
                eos_first = float(np.exp(logits[_EOS] - log_z))
            if token == _EOS:
                return ids, logprobs, eos_first, True
            if step == budget:
                break
            ids.append(token)
            logprobs.append(float(logits[token] - log_z))
            for name, value in zip(self._output_names[1:], outputs[1:]):
                # the cross-attention cache comes from the first step; later steps only pass it on
                if step == 0 or ".decoder." in name:
                    past[name.replace("present.", "past_key_values.", 1)] = value
        return ids, logprobs, eos_first, False

    def _word_pieces(self, ids: list[int], logprobs: list[float]) -> list[tuple[str, float]]:
        """Group tokens into words (a "\u2581" starts one): [(text with a leading space, probability)]."""
        words: list[tuple[bytearray, list[float]]] = []
        for token, logprob in zip(ids, logprobs):
            piece = self._tokens[token] if token < self._vocab and token > _EOS else b""
            if not piece:
                continue
            if piece.startswith(_SPACE.encode()) or not words:
                words.append((bytearray(), []))
            words[-1][0].extend(piece)
            words[-1][1].append(logprob)
        out = []
        for raw, lps in words:
            text = raw.decode("utf-8", errors="replace").replace(_SPACE, " ")
            if not text.startswith(" "):
                text = " " + text
            if text.strip():
                out.append((text, float(np.exp(np.mean(lps)))))
        return out

    @staticmethod
    def _timed_words(pieces: list[tuple[str, float]], samples: np.ndarray, offset_s: float) -> list[Word]:
        """Words with estimated times: the voiced span shared among the words by their length."""
        if not pieces:
            return []
        frames = samples[: samples.shape[0] // _FRAME_SAMPLES * _FRAME_SAMPLES].reshape(-1, _FRAME_SAMPLES)
        audio_s = samples.shape[0] / SAMPLE_RATE_HZ
        start_s, end_s = 0.0, audio_s
        if frames.shape[0]:
            rms = np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1))
            voiced = np.flatnonzero(rms >= _VOICED_FRACTION * rms.max())
            if voiced.size:
                start_s = voiced[0] * _FRAME_SAMPLES / SAMPLE_RATE_HZ
                end_s = (voiced[-1] + 1) * _FRAME_SAMPLES / SAMPLE_RATE_HZ
        weights = np.array([len(text.strip()) + 1 for text, _ in pieces], dtype=np.float64)
        # each word lasts at least _MIN_WORD_S (a zero-length word reads as a loop to the agreement)
        widths = np.maximum((end_s - start_s) * weights / weights.sum(), _MIN_WORD_S)
        edges = start_s + np.concatenate([[0.0], np.cumsum(widths)])
        return [
            Word(text, offset_s + float(edges[i]), offset_s + float(edges[i + 1]), probability)
            for i, (text, probability) in enumerate(pieces)
        ]
