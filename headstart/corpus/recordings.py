"""The packaged real recordings (bench/data/speech/): transcripts, licences and true speech bounds.

52 recordings of real people, 16 kHz mono PCM16 WAV, listed in ``data/speech/transcripts.tsv``. Each
row carries the reference text, source, licence, duration and the start/end of speech found once,
offline, by ``data/make_speech_index.py`` (Silero VAD refined by an energy envelope, cross-checked with
whisper word timestamps; ``data/README.md`` says how). The demo, the tests and the benchmarks all read
the recordings from here; nothing is recomputed at run time.

Example:
    >>> from headstart.corpus.recordings import default_recording, recording
    >>> rec = recording("librivox-0880")
    >>> rec.speech_end_s <= rec.duration_s
    True
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

DEFAULT_RECORDING_NAME = "goforward"
"""``pocketsphinx_misc/goforward.wav``, "go forward ten meters": a short spoken request to a machine by
an ordinary (non-studio) speaker, with real room noise around it; whisper tiny.en transcribes it
exactly ("Go forward 10 meters."). The only question in the set ("Change to which folder?") is an IVR
prompt, which reads less like something a user says to an assistant."""

ASTERISK_ATTRIBUTION = "Recorded by Allison Smith (Asterisk core sounds)"

_SPEECH_DIR = "speech"
_INDEX_FILE = "transcripts.tsv"


@dataclass(frozen=True, slots=True)
class Recording:
    """One packaged recording.

    Attributes:
        name: file stem, e.g. ``"librivox-0880"`` (unique in the set).
        path: absolute path of the WAV file (16 kHz mono PCM16).
        text: reference transcript as distributed (may carry punctuation, digits or "..."; normalise
            with ``headstart.corpus.wer.normalize_text`` before scoring).
        sample_rate: Hz (16000 for every file).
        duration_s: length of the file in seconds.
        speech_start_s: start of the first speech (s from the file start).
        speech_end_s: true end of the last speech (s from the file start): the reference point for
            voice-to-voice latency.
        source: where the file comes from (Debian package, version and path).
        license: licence of the file (SPDX id plus notes).
    """

    name: str
    path: Path
    text: str
    sample_rate: int
    duration_s: float
    speech_start_s: float
    speech_end_s: float
    source: str
    license: str

    @property
    def relative_path(self) -> str:
        """Path inside the speech folder, e.g. ``"pocketsphinx_librivox/librivox-0880.wav"``."""
        return f"{self.path.parent.name}/{self.path.name}"

    @property
    def attribution(self) -> str:
        """Attribution to show wherever the audio is redistributed or played ("" when none is due)."""
        return ASTERISK_ATTRIBUTION if "Allison Smith" in self.license else ""

    def read(self) -> np.ndarray:
        """The samples as float32 mono, shape (num_samples,), in [-1, 1] (via headstart.audio.read_wav)."""
        from headstart.audio import read_wav

        return read_wav(self.path, sample_rate=self.sample_rate)


def speech_dir() -> Path:
    """Folder of the packaged recordings (with ``transcripts.tsv`` and the README)."""
    return Path(str(resources.files("headstart.corpus").joinpath(_SPEECH_DIR)))


@functools.cache
def _load() -> tuple[Recording, ...]:
    root = speech_dir()
    index = root / _INDEX_FILE
    if not index.is_file():
        raise FileNotFoundError(f"bench data index missing: {index} (is the package data installed?)")
    with index.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    out = []
    for row in rows:
        path = root / row["file"]
        out.append(Recording(
            name=path.stem,
            path=path,
            text=row["text"],
            sample_rate=int(row["sample_rate"]),
            duration_s=float(row["duration_s"]),
            speech_start_s=float(row["speech_start_s"]),
            speech_end_s=float(row["speech_end_s"]),
            source=row["source"],
            license=row["license"],
        ))
    names = [r.name for r in out]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate recording names in {index}")
    return tuple(out)


def recordings() -> list[Recording]:
    """All packaged recordings, in the order of ``transcripts.tsv`` (LibriVox, cards, misc, Asterisk)."""
    return list(_load())


def recording(name: str) -> Recording:
    """One recording by file stem (``"librivox-0880"``), file name (``"librivox-0880.wav"``) or path
    relative to the speech folder (``"pocketsphinx_librivox/librivox-0880.wav"``).

    Raises:
        KeyError: for an unknown name; the message lists the known names.
    """
    key = str(name).strip()
    for rec in _load():
        if key in (rec.name, rec.path.name, rec.relative_path):
            return rec
    known = ", ".join(r.name for r in _load())
    raise KeyError(f"no packaged recording named {name!r}; known names: {known}")


DEMO_RECORDING_NAME = "capital-of-france"


@functools.cache
def demo_recording() -> Recording:
    """The question `headstart demo` answers when given no recording: "What is the capital of France?",
    **synthetic speech** (see `headstart/corpus/demo/README.md`: no packaged recording of a real person
    asks an everyday question). Not in `recordings()`, the real-speech set the benches use."""
    return Recording(
        name=DEMO_RECORDING_NAME,
        path=Path(str(resources.files("headstart.corpus").joinpath("demo", f"{DEMO_RECORDING_NAME}.wav"))),
        text="What is the capital of France?",
        sample_rate=16000,
        duration_s=3.265,
        speech_start_s=0.55,
        speech_end_s=2.10,
        source="synthetic: generated for this project with the Piper voice en_US-joe-medium "
               "(headstart/corpus/demo/README.md)",
        license="CC0 (the voice's dataset); generated audio",
    )


def default_recording() -> Recording:
    """The demo utterance: "go forward ten meters" (see ``DEFAULT_RECORDING_NAME`` for why)."""
    return recording(DEFAULT_RECORDING_NAME)
