"""Find each packaged recording's true start and end of speech, once, offline; write transcripts.tsv.

Run with the project venv (needs the whisper tiny.en folder for the cross-check):

    .venv/bin/python headstart/corpus/make_speech_index.py [--whisper-model DIR] [--dry-run]

Method (README.md beside this file says the same):

1. Silero VAD v6 (the ONNX file bundled in faster-whisper) via ``faster_whisper.vad.get_speech_timestamps``
   with careful settings: threshold 0.25 (neg 0.15), min silence 50 ms, min speech 100 ms, no padding.
   Its boundaries are on the 32 ms (512-sample) window grid and lag the audio a little.
2. An energy envelope of 10 ms RMS windows of the signal high-passed at 200 Hz (removes DC offset,
   rumble and low thumps). Threshold = max(noise floor + 10 dB, speech level - 40 dB), where the noise
   floor is the median level of windows > 100 ms from any VAD region (2nd percentile of all windows
   when fewer than 20 such windows exist; clamped at -90 dBFS) and the speech level the 95th
   percentile inside the VAD regions. The stored end is the end of the last above-threshold run
   (gaps <= 60 ms bridged) that overlaps the last VAD region, at most 300 ms past the VAD end; the
   start likewise for the first region.
3. Cross-checks: the last above-threshold run of the whole file (energy alone) and the end of the
   last word in faster-whisper's word timestamps (beam 5, no VAD filter). Files where one of them
   differs from the stored end by more than 150 ms are listed; ``--inspect`` prints their envelope
   tail (level and share of energy above 3 kHz per 10 ms window) for a judgement by eye.

The stored values are never recomputed at run time; rerun this script only when the data changes.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "speech"
TSV_PATH = DATA_DIR / "transcripts.tsv"
SAMPLE_RATE_HZ = 16_000
WINDOW_S = 0.010
SEARCH_S = 0.300
BRIDGE_S = 0.060
FLOOR_MARGIN_DB = 10.0
BELOW_SPEECH_DB = 40.0
FLOOR_CLAMP_DB = -90.0
DISAGREE_S = 0.150
HIGH_PASS_HZ = 200.0
COMPUTED_COLUMNS = ("duration_s", "speech_start_s", "speech_end_s")
# Ends set by inspection where the automatic pass is known to be off (see the data README): a late end
# flatters every latency measured from it.
MANUAL_END_S = {
    # the "s" of "meters" ends at ~2.08-2.10 s; 2.10-2.19 s is a low thump (80-200 Hz, not speech)
    "pocketsphinx_misc/goforward.wav": 2.090,
}


@dataclass(frozen=True)
class Envelope:
    """10 ms RMS levels of one file (dBFS, shape (num_windows,)) and the derived threshold."""

    level_db: np.ndarray
    floor_db: float
    speech_db: float
    threshold_db: float

    @property
    def active(self) -> np.ndarray:
        return self.level_db > self.threshold_db


def rms_db(samples: np.ndarray, window: int) -> np.ndarray:
    """Non-overlapping RMS levels in dBFS, one per `window` samples (last partial window kept)."""
    pad = (-len(samples)) % window
    x = np.pad(samples.astype(np.float64), (0, pad)).reshape(-1, window)
    return 20.0 * np.log10(np.sqrt(np.mean(x * x, axis=1)) + 1e-10)


def high_pass(samples: np.ndarray, cutoff_hz: float = HIGH_PASS_HZ, num_taps: int = 801) -> np.ndarray:
    """Linear-phase FIR high-pass (Hamming-windowed sinc, spectral inversion; 801 taps = 50 ms, no
    delay with mode="same"): removes DC offset and low rumble/thumps, which in the LibriVox files
    sit ~30 dB above the rest of the background and would mask weak word endings. A brick-wall FFT
    filter is not used: its ringing spreads speech energy into the silences."""
    n = np.arange(num_taps) - (num_taps - 1) / 2
    lowpass = np.sinc(2 * cutoff_hz / SAMPLE_RATE_HZ * n) * np.hamming(num_taps)
    lowpass /= lowpass.sum()
    kernel = -lowpass
    kernel[(num_taps - 1) // 2] += 1.0
    return np.convolve(samples.astype(np.float64), kernel, mode="same")


def envelope(samples: np.ndarray, regions: list[tuple[float, float]]) -> Envelope:
    """Levels of the high-passed signal, noise floor (median of windows > 100 ms away from any VAD region, or the 2nd percentile
    of all windows when fewer than 20 such windows exist), speech level and threshold."""
    window = int(WINDOW_S * SAMPLE_RATE_HZ)
    level = rms_db(high_pass(samples), window)
    inside = np.zeros(len(level), dtype=bool)
    near = np.zeros(len(level), dtype=bool)
    margin = int(0.100 / WINDOW_S)
    for start_s, end_s in regions:
        a, b = int(start_s / WINDOW_S), int(np.ceil(end_s / WINDOW_S))
        inside[a:b] = True
        near[max(0, a - margin) : b + margin] = True
    outside = level[~near]
    floor = float(np.median(outside)) if len(outside) >= 20 else float(np.percentile(level, 2))
    floor = max(floor, FLOOR_CLAMP_DB)
    speech = float(np.percentile(level[inside] if inside.any() else level, 95))
    threshold = max(floor + FLOOR_MARGIN_DB, speech - BELOW_SPEECH_DB)
    return Envelope(level, floor, speech, threshold)


def vad_regions(samples: np.ndarray) -> list[tuple[float, float]]:
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    options = VadOptions(
        threshold=0.25,
        neg_threshold=0.15,
        min_speech_duration_ms=100,
        min_silence_duration_ms=50,
        speech_pad_ms=0,
    )
    stamps = get_speech_timestamps(samples, options, sampling_rate=SAMPLE_RATE_HZ)
    return [(s["start"] / SAMPLE_RATE_HZ, s["end"] / SAMPLE_RATE_HZ) for s in stamps]


def _bridged_runs(active: np.ndarray) -> list[tuple[int, int]]:
    """Runs [first, last] of active windows, joining runs separated by gaps of <= BRIDGE_S."""
    bridge = int(round(BRIDGE_S / WINDOW_S))
    runs: list[tuple[int, int]] = []
    for j in np.flatnonzero(active):
        if runs and j - runs[-1][1] - 1 <= bridge:
            runs[-1] = (runs[-1][0], int(j))
        else:
            runs.append((int(j), int(j)))
    return runs


def refine_end(env: Envelope, region: tuple[float, float]) -> float:
    """End (s) of the last above-threshold run that overlaps the VAD `region`, cut at SEARCH_S past
    the VAD end; the VAD end itself when no run overlaps the region."""
    start_i = int(region[0] / WINDOW_S)
    end_i = int(round(region[1] / WINDOW_S))
    limit = end_i + int(round(SEARCH_S / WINDOW_S))
    runs = [r for r in _bridged_runs(env.active) if r[0] < end_i and r[1] >= start_i]
    if not runs:
        return region[1]
    return (min(runs[-1][1], limit) + 1) * WINDOW_S


def refine_start(env: Envelope, region: tuple[float, float]) -> float:
    """Start (s) of the first above-threshold run that overlaps the VAD `region`, cut at SEARCH_S
    before the VAD start; the VAD start itself when no run overlaps the region."""
    start_i = int(region[0] / WINDOW_S)
    end_i = int(round(region[1] / WINDOW_S))
    limit = max(0, start_i - int(round(SEARCH_S / WINDOW_S)))
    runs = [r for r in _bridged_runs(env.active) if r[0] < end_i and r[1] >= start_i]
    if not runs:
        return region[0]
    return max(runs[0][0], limit) * WINDOW_S


def energy_only_end(env: Envelope, min_run_s: float = 0.030) -> float:
    """End (s) of the last bridged above-threshold run of at least `min_run_s` in the whole file."""
    runs = [r for r in _bridged_runs(env.active) if (r[1] - r[0] + 1) * WINDOW_S >= min_run_s]
    return (runs[-1][1] + 1) * WINDOW_S if runs else float("nan")


def hf_share(samples: np.ndarray, t0_s: float, t1_s: float, cutoff_hz: float = 3000.0) -> float:
    """Share (0..1) of the energy in [t0_s, t1_s) above `cutoff_hz`: high for fricatives (s, f, sh)."""
    x = samples[int(t0_s * SAMPLE_RATE_HZ) : int(t1_s * SAMPLE_RATE_HZ)].astype(np.float64)
    if len(x) < 32:
        return float("nan")
    power = np.abs(np.fft.rfft(x * np.hanning(len(x)))) ** 2
    freqs = np.fft.rfftfreq(len(x), 1.0 / SAMPLE_RATE_HZ)
    total = power.sum()
    return float(power[freqs >= cutoff_hz].sum() / total) if total > 0 else float("nan")


def print_tail(name: str, samples: np.ndarray, env: Envelope, end_s: float) -> None:
    """Levels (dBFS) and high-frequency share of 10 ms windows from 300 ms before to 300 ms after end_s."""
    print(f"  tail of {name} (threshold {env.threshold_db:.1f} dBFS; '|' = stored end {end_s:.3f} s)")
    i0 = max(0, int(round((end_s - SEARCH_S) / WINDOW_S)))
    i1 = min(len(env.level_db), int(round((end_s + SEARCH_S) / WINDOW_S)))
    cells = []
    for i in range(i0, i1):
        mark = "|" if abs(i * WINDOW_S - end_s) < WINDOW_S / 2 else " "
        hf = hf_share(samples, i * WINDOW_S, (i + 1) * WINDOW_S)
        cells.append(f"{mark}{env.level_db[i]:4.0f}/{100 * hf:2.0f}%")
    for k in range(0, len(cells), 10):
        print(f"    {(i0 + k) * WINDOW_S:6.2f}s " + " ".join(cells[k : k + 10]))


def whisper_last_word_end(model, samples: np.ndarray) -> tuple[float | None, str]:
    segments, _ = model.transcribe(
        samples, language="en", beam_size=5, word_timestamps=True, vad_filter=False,
        condition_on_previous_text=False,
    )
    words = [w for seg in segments for w in (seg.words or [])]
    text = "".join(w.word for w in words).strip()
    return (words[-1].end if words else None), text


def default_whisper_model() -> Path:
    try:
        from headstart.models.store import resolve_model
    except ImportError as exc:  # catalogue not there yet
        raise SystemExit(f"pass --whisper-model DIR (headstart.models unavailable: {exc})") from exc
    return resolve_model("whisper-tiny.en")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--whisper-model", type=Path, default=None, help="CTranslate2 whisper folder")
    parser.add_argument("--dry-run", action="store_true", help="print the table, do not write the TSV")
    parser.add_argument("--inspect", action="store_true", help="print the envelope tail of flagged files")
    args = parser.parse_args(argv)

    import soundfile as sf
    from faster_whisper import WhisperModel

    model_dir = args.whisper_model or default_whisper_model()
    model = WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=1)

    with TSV_PATH.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        assert reader.fieldnames is not None  # the TSV has a header row
        columns = [c for c in reader.fieldnames if c not in COMPUTED_COLUMNS]
        rows = list(reader)

    print(f"{'file':52s} {'dur':>6s} {'start':>6s} {'vad':>6s} {'end':>6s} {'energy':>6s} "
          f"{'whisp':>6s} {'floor':>6s} {'speech':>6s} {'thr':>6s}  differs by > {DISAGREE_S * 1000:.0f} ms")
    flagged = []
    whisper_offsets = []
    for row in rows:
        path = DATA_DIR / row["file"]
        samples, rate = sf.read(path, dtype="float32")
        if rate != SAMPLE_RATE_HZ or samples.ndim != 1:
            raise SystemExit(f"{path}: expected 16 kHz mono, got {rate} Hz shape {samples.shape}")
        duration_s = len(samples) / rate
        regions = vad_regions(samples)
        if not regions:
            raise SystemExit(f"{path}: Silero VAD found no speech")
        env = envelope(samples, regions)
        vad_end = regions[-1][1]
        start = refine_start(env, regions[0])
        end = min(MANUAL_END_S.get(row["file"], refine_end(env, regions[-1])), duration_s)
        energy_end = min(energy_only_end(env), duration_s)
        whisper_end, whisper_text = whisper_last_word_end(model, samples)
        others = {"vad": vad_end, "energy": energy_end, "whisper": whisper_end}
        differs = [k for k, v in others.items() if v is None or not abs(v - end) <= DISAGREE_S]
        if whisper_end is not None:
            whisper_offsets.append(whisper_end - end)
        if differs:
            flagged.append((row["file"], samples, env, end, others, whisper_text))
        print(f"{row['file']:52s} {duration_s:6.3f} {start:6.3f} {vad_end:6.3f} {end:6.3f} "
              f"{energy_end:6.3f} {whisper_end if whisper_end is not None else float('nan'):6.3f} "
              f"{env.floor_db:6.1f} {env.speech_db:6.1f} {env.threshold_db:6.1f}  {','.join(differs)}")
        row["duration_s"] = f"{duration_s:.3f}"
        row["speech_start_s"] = f"{start:.3f}"
        row["speech_end_s"] = f"{end:.3f}"

    offsets = np.array(whisper_offsets)
    print(f"\nwhisper last-word end minus stored end: median {np.median(offsets) * 1000:+.0f} ms, "
          f"p10 {np.percentile(offsets, 10) * 1000:+.0f} ms, p90 {np.percentile(offsets, 90) * 1000:+.0f} ms")
    print(f"{len(flagged)} of {len(rows)} files where another method differs from the stored end "
          f"by > {DISAGREE_S * 1000:.0f} ms (level dBFS / % of energy above 3 kHz per 10 ms window):")
    for name, samples, env, end, others, text in flagged:
        print(f"{name}: stored {end:.3f}, " + ", ".join(
            f"{k} {v:.3f}" if v is not None else f"{k} none" for k, v in others.items()) + f" | {text!r}")
        if args.inspect:
            print_tail(name, samples, env, end)

    if not args.dry_run:
        with TSV_PATH.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns + list(COMPUTED_COLUMNS), delimiter="\t",
                                    quoting=csv.QUOTE_NONE, escapechar="\\", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {TSV_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
