"""Build a folder of real speech to fit end-of-turn models on: the Asterisk core-sounds prompts (Debian).

An explicit step a user runs (nothing in headstart downloads it): `apt-get download` fetches the two
Debian packages `asterisk-core-sounds-en-g722` (the audio, G.722 at 16 kHz) and `asterisk-core-sounds-en`
(the prompt texts, `core-sounds-en.txt`) into a temporary folder, `dpkg-deb -x` unpacks them, and every
top-level prompt is decoded to 16 kHz mono PCM16 WAV with PyAV (the FFmpeg bindings faster-whisper
already installs; its G.722 decoder gives the packaged bench WAVs sample for sample). Each file is
paired with its text (subfolders flattened: followme/sorry.g722 -> followme-sorry.wav); kept are the prompts

* with a spoken text (not "[ascending tones]"-like descriptions),
* whose file lasts 1-8 s (Smart Turn hears the last 8 s),
* that are none of the 52 bench recordings and share no text with them: the normalised text (case,
  punctuation, digits as words) neither equals a bench transcript nor shares a run of >= 3 words with
  one, so the bench stays a held-out test of whatever is fitted here.

Written to OUT (default ~/.cache/headstart/fit_speech): the WAVs and a transcripts.tsv with the bench's
columns (file, text, sample_rate, source, license, duration_s, speech_start_s, speech_end_s), which
`headstart.bench.asr.load_items(OUT)` and `headstart bench asr --input-dir OUT` read; the speech bounds
are Silero's, computed as that loader computes them. Deterministic (files sorted by name).

    .venv/bin/python scripts/make_fit_speech.py [--out DIR]

Licence and attribution: the recordings are CC-BY-SA-3.0, "Recorded by Allison Smith (Asterisk core
sounds)" (Debian's copyright file of asterisk-core-sounds-en-g722). They are not committed to this
repository; keep the attribution with any copy.

Raises SystemExit with a clear message when apt-get or dpkg-deb is missing, a download fails or the
packages do not hold what is expected.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

PACKAGES = ("asterisk-core-sounds-en-g722", "asterisk-core-sounds-en")
SOUNDS_SUBDIR = "usr/share/asterisk/sounds/en_US_f_Allison"
TEXTS_FILE = "usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
LICENSE = "CC-BY-SA-3.0 (Recorded by Allison Smith (Asterisk core sounds))"
SAMPLE_RATE_HZ = 16_000
MIN_DURATION_S = 1.0
MAX_DURATION_S = 8.0
MIN_SHARED_WORDS = 3
COLUMNS = ("file", "text", "sample_rate", "source", "license", "duration_s", "speech_start_s", "speech_end_s")
_ONES = "zero one two three four five six seven eight nine".split()


def parse_prompt_texts(lines: Iterable[str]) -> dict[str, str]:
    """Prompt name -> text from core-sounds-en.txt lines ("name: text"; a name may hold a subfolder,
    "followme/sorry"). Comments (";"), blank lines and texts that describe a sound rather than say
    words ("[beep tone]", "(1 second of silence)") are skipped."""
    out: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith(";") or ": " not in line:
            continue
        name, text = line.split(": ", 1)
        name, text = name.strip(), " ".join(text.split())
        if not name or not text or text.startswith(("[", "(")):
            continue
        out[name] = text
    return out


def _spell(word: str) -> str:
    """A digit run as words, digit by digit beyond two digits ("5" -> "five", "42" -> "forty two")."""
    try:
        from num2words import num2words
    except ImportError:  # pragma: no cover - num2words is a bench dependency
        return " ".join(_ONES[int(d)] for d in word)
    if len(word) <= 2:
        return num2words(int(word)).replace("-", " ")
    return " ".join(_ONES[int(d)] for d in word)


def normalize(text: str) -> list[str]:
    """Words of `text` in lower case, punctuation dropped (apostrophes kept), digits as words."""
    words = re.sub(r"[^\w' ]+", " ", text.lower().replace("-", " ")).split()
    out: list[str] = []
    for w in words:
        w = w.strip("'")
        if w.isdigit():
            out.extend(_spell(w).split())
        elif w:
            out.append(w)
    return out


def _spans(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def overlaps(text: str, held_out: Sequence[str], min_words: int = MIN_SHARED_WORDS) -> bool:
    """True when `text`, normalised, equals one of `held_out` or shares a run of >= `min_words` words
    with one (a shorter text counts when it equals the whole of the other)."""
    words = normalize(text)
    for other in held_out:
        other_words = normalize(other)
        if words == other_words:
            return True
        if len(words) >= min_words and len(other_words) >= min_words and _spans(words, min_words) & _spans(other_words, min_words):
            return True
    return False


def select_prompts(texts: Mapping[str, str], audio_names: Iterable[str], held_out_texts: Sequence[str],
                   held_out_names: Iterable[str] = ()) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Pair audio files (names without extension) with their texts; drop what the bench holds.

    Returns ((name, text) pairs sorted by name, counts of what was dropped and why: "no_text",
    "bench_name", "overlap")."""
    names_out = set(held_out_names)
    dropped = {"no_text": 0, "bench_name": 0, "overlap": 0}
    kept = []
    for name in sorted(set(audio_names)):
        text = texts.get(name)
        if text is None:
            dropped["no_text"] += 1
        elif name in names_out:
            dropped["bench_name"] += 1
        elif overlaps(text, held_out_texts):
            dropped["overlap"] += 1
        else:
            kept.append((name, text))
    return kept, dropped


def _run(cmd: list[str], cwd: Path) -> None:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()[-500:]}")


def fetch_packages(workdir: Path) -> Path:
    """Download PACKAGES with apt-get into `workdir` and unpack them; returns the unpacked root."""
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: this step needs a Debian/Ubuntu system with apt "
                             f"(packages {', '.join(PACKAGES)})")
    _run(["apt-get", "download", *PACKAGES], workdir)
    root = workdir / "root"
    root.mkdir()
    for package in PACKAGES:
        debs = sorted(workdir.glob(f"{package}_*.deb"))
        if not debs:
            raise SystemExit(f"apt-get download left no {package}_*.deb in {workdir}")
        _run(["dpkg-deb", "-x", str(debs[-1]), str(root)], workdir)
    return root


def decode_g722(path: Path):
    """Samples of a raw G.722 file as float32 mono in [-1, 1], shape (n,), at 16 kHz (PyAV)."""
    import av
    import numpy as np

    with av.open(str(path), format="g722") as container:
        stream = container.streams.audio[0]
        if stream.rate != SAMPLE_RATE_HZ:
            raise SystemExit(f"{path}: expected {SAMPLE_RATE_HZ} Hz, PyAV reports {stream.rate}")
        frames = [f.to_ndarray().reshape(-1) for f in container.decode(stream)]
    pcm = np.concatenate(frames) if frames else np.zeros(0, np.int16)
    if pcm.dtype != np.int16:
        raise SystemExit(f"{path}: expected 16-bit samples, got {pcm.dtype}")
    return pcm.astype(np.float32) / 32768.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "headstart" / "fit_speech")
    args = parser.parse_args(argv)

    import numpy as np
    import soundfile as sf

    from headstart.bench.asr import _speech_bounds
    from headstart.corpus.recordings import recordings

    bench = recordings()
    with tempfile.TemporaryDirectory(prefix="headstart-fit-speech-") as tmp:
        root = fetch_packages(Path(tmp))
        texts_path = root / TEXTS_FILE
        sounds = root / SOUNDS_SUBDIR
        if not texts_path.is_file() or not sounds.is_dir():
            raise SystemExit(f"the packages lack {TEXTS_FILE} or {SOUNDS_SUBDIR}")
        with gzip.open(texts_path, "rt", encoding="utf-8", errors="replace") as f:
            texts = parse_prompt_texts(f)
        audio = {p.relative_to(sounds).with_suffix("").as_posix(): p for p in sounds.rglob("*.g722")}
        pairs, dropped = select_prompts(texts, audio, [r.text for r in bench], [r.name for r in bench])
        version = sorted(Path(tmp).glob(f"{PACKAGES[0]}_*.deb"))[-1].name
        args.out.mkdir(parents=True, exist_ok=True)
        rows, too_short, too_long = [], 0, 0
        for i, (name, text) in enumerate(pairs, 1):
            samples = decode_g722(audio[name])
            duration_s = len(samples) / SAMPLE_RATE_HZ
            if duration_s < MIN_DURATION_S:
                too_short += 1
                continue
            if duration_s > MAX_DURATION_S:
                too_long += 1
                continue
            start_s, end_s = _speech_bounds(samples)
            file = name.replace("/", "-") + ".wav"
            sf.write(args.out / file, np.clip(samples, -1.0, 1.0), SAMPLE_RATE_HZ, subtype="PCM_16")
            rows.append({"file": file, "text": text, "sample_rate": SAMPLE_RATE_HZ,
                         "source": f"Debian {version} : {SOUNDS_SUBDIR}/{name}.g722", "license": LICENSE,
                         "duration_s": f"{duration_s:.3f}", "speech_start_s": f"{start_s:.3f}",
                         "speech_end_s": f"{end_s:.3f}"})
            print(f"\r{i}/{len(pairs)} decoded, {len(rows)} kept", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    with (args.out / "transcripts.tsv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} prompts to {args.out} (dropped: {dropped['bench_name']} bench recordings, "
          f"{dropped['overlap']} sharing text with the bench, {dropped['no_text']} without a text, "
          f"{too_short} under {MIN_DURATION_S:g} s, {too_long} over {MAX_DURATION_S:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
