"""coqui-tts worker: runs in the optional `.venv-coqui` and speaks to headstart over stdin/stdout.

Run by file path, never as `-m headstart...`: headstart is not installed in that venv, and this file
imports only the standard library, numpy and TTS (coqui-tts), so it must not import headstart either.

    .venv-coqui/bin/python -I headstart/tts/coqui_worker.py --model M.pth --config config.json

Protocol (all integers little-endian). Every message is one frame:

    kind: 1 byte | length: uint32 | payload: `length` bytes

Main -> worker: kind b"S" (synthesise; payload UTF-8 text), b"C" (cancel the utterance in progress;
no payload), b"Q" (quit).
Worker -> main: b"H" once after loading (payload JSON: {"sample_rate", "kind", "model"}),
b"A" audio (payload float32 mono PCM at sample_rate, as each piece is produced), b"E" end of the
utterance, b"X" error (payload UTF-8 message; the worker stays up unless loading failed).
Every b"S" is answered by zero or more b"A" and then exactly one b"E" or b"X".

Models: VITS (and any other coqui model that loads with `TTS.utils.synthesizer.Synthesizer`) yields
one array per sentence (coqui's own sentence splitter); XTTS (config `model == "xtts"`) streams with
`Xtts.inference_stream`, conditioned on `--speaker-wav`.

coqui prints progress to stdout; the real stdout is moved to a private file descriptor before
anything is imported, and fd 1 is pointed at stderr, so nothing but frames reaches the pipe.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import struct
import sys
import traceback
import unicodedata

_HEADER = struct.Struct("<cI")


class _Cancelled(Exception):
    pass


class _Channel:
    def __init__(self, inp, out) -> None:
        self._in = inp
        self._out = out
        self._pending: list[tuple[bytes, bytes]] = []

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        self._out.write(_HEADER.pack(kind, len(payload)))
        self._out.write(payload)
        self._out.flush()

    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = self._in.read(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def recv(self) -> tuple[bytes, bytes] | None:
        if self._pending:
            return self._pending.pop(0)
        head = self._read_exact(_HEADER.size)
        if head is None:
            return None
        kind, length = _HEADER.unpack(head)
        payload = self._read_exact(length) if length else b""
        if payload is None:
            return None
        return kind, payload

    def cancel_requested(self) -> bool:
        """Non-blocking look at stdin between audio pieces: True if a cancel (or quit/EOF) arrived."""
        while select.select([self._in], [], [], 0)[0]:
            msg = self.recv()
            if msg is None:
                self._pending.append((b"Q", b""))
                return True
            if msg[0] == b"C":
                return True
            self._pending.append(msg)
            if msg[0] == b"Q":
                return True
        return False


def _load_audio_soundfile(audiopath, sampling_rate):
    """Drop-in for TTS.tts.models.xtts.load_audio: (1, num_samples) float32 tensor at sampling_rate."""
    import soundfile
    import torch
    import torchaudio.functional

    data, rate = soundfile.read(str(audiopath), dtype="float32", always_2d=True)
    audio = torch.from_numpy(data.mean(axis=1)).unsqueeze(0)
    if rate != sampling_rate:
        audio = torchaudio.functional.resample(audio, rate, sampling_rate)
    return audio.clip_(-1, 1)


def _load(args):
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from TTS.config import load_config

    config = load_config(args.config)
    if getattr(config, "model", None) == "xtts":
        from TTS.tts.models.xtts import Xtts

        if not args.speaker_wav:
            raise ValueError("an XTTS model needs --speaker-wav (a few seconds of the voice to clone)")
        import TTS.tts.models.xtts as xtts_module

        # coqui reads the reference with torchaudio.load -> torchcodec, which needs the system's FFmpeg
        # libraries; soundfile (a coqui dependency) reads WAV/FLAC/OGG without them.
        xtts_module.load_audio = _load_audio_soundfile
        model = Xtts(config)
        checkpoint_dir = os.path.dirname(os.path.abspath(args.model)) if os.path.isfile(args.model) else args.model
        checkpoint_path = args.model if os.path.isfile(args.model) else None
        model.load_checkpoint(
            config,
            checkpoint_dir=checkpoint_dir,
            checkpoint_path=checkpoint_path,
            vocab_path=args.vocab,
            speaker_file_path=None,
            use_deepspeed=False,
        )
        model.eval()
        with torch.inference_mode():
            gpt_latent, speaker_embedding = model.get_conditioning_latents(audio_path=[args.speaker_wav])
        rate = int(config.audio.output_sample_rate)

        def speak(text: str):
            with torch.inference_mode():
                for piece in model.inference_stream(
                    text,
                    args.language,
                    gpt_latent,
                    speaker_embedding,
                    stream_chunk_size=args.stream_chunk_size,
                    enable_text_splitting=True,
                ):
                    yield np.asarray(piece.detach().cpu().float().numpy(), dtype=np.float32).reshape(-1)

        return "xtts", rate, speak

    from TTS.utils.synthesizer import Synthesizer

    synth = Synthesizer(tts_checkpoint=args.model, tts_config_path=args.config, use_cuda=False)
    rate = int(synth.output_sample_rate)

    tokenizer = getattr(synth.tts_model, "tokenizer", None)

    def speak(text: str):
        # NFKC first: full-width letters ("ｘｙｚ") become ones the model's character set may hold.
        for sentence in synth.split_into_sentences(unicodedata.normalize("NFKC", text)):
            if not any(ch.isalnum() for ch in sentence):
                continue
            if tokenizer is not None and not tokenizer.text_to_ids(sentence):
                continue  # nothing in the model's character set: coqui would fail on an empty input
            wav = synth.tts(sentence, speaker_name=args.speaker, language_name=args.language_name, split_sentences=False)
            yield np.asarray(wav, dtype=np.float32).reshape(-1)

    return str(getattr(config, "model", "coqui")), rate, speak


def main(argv: list[str] | None = None) -> int:
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints from coqui go to stderr, not into the frame stream
    sys.stdout = sys.stderr
    channel = _Channel(os.fdopen(os.dup(0), "rb", buffering=0), out)

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="checkpoint file (.pth) or, for XTTS, its folder")
    parser.add_argument("--config", required=True, help="the model's config.json")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--speaker", default=None, help="speaker name of a multi-speaker VITS model")
    parser.add_argument("--language-name", default=None, help="language of a multi-lingual VITS model")
    parser.add_argument("--speaker-wav", default=None, help="XTTS: reference recording of the voice")
    parser.add_argument("--language", default="en", help="XTTS: language code")
    parser.add_argument("--vocab", default=None, help="XTTS: tokenizer vocab.json (default: next to the model)")
    parser.add_argument("--stream-chunk-size", type=int, default=20, help="XTTS: GPT tokens per audio piece")
    args = parser.parse_args(argv)

    try:
        import numpy as np

        kind, rate, speak = _load(args)
    except BaseException as exc:  # report why, then exit: the main process shows the message
        channel.send(b"X", f"coqui model did not load: {type(exc).__name__}: {exc}".encode())
        traceback.print_exc()
        return 1
    channel.send(b"H", json.dumps({"sample_rate": rate, "kind": kind, "model": args.model}).encode())

    while True:
        msg = channel.recv()
        if msg is None or msg[0] == b"Q":
            return 0
        kind_in, payload = msg
        if kind_in == b"C":
            continue  # cancel with nothing running
        if kind_in != b"S":
            channel.send(b"X", f"unknown message kind {kind_in!r}".encode())
            continue
        text = payload.decode("utf-8", "replace")
        try:
            for piece in speak(text):
                if channel.cancel_requested():
                    raise _Cancelled
                piece = np.nan_to_num(np.clip(piece, -1.0, 1.0)).astype("<f4")
                if piece.size:
                    channel.send(b"A", piece.tobytes())
            channel.send(b"E")
        except _Cancelled:
            channel.send(b"E")
        except Exception as exc:  # one bad utterance must not end the worker
            traceback.print_exc()
            channel.send(b"X", f"{type(exc).__name__}: {exc}".encode())


if __name__ == "__main__":
    sys.exit(main())
