"""`headstart bench stages [--device auto|cpu|cuda]`: the LLM core's stage costs on one device, and the
voice-to-voice floor they give with the CPU-measured ASR, end-of-turn and TTS figures.

Each LLM preset is built from its own config.json (packaged in `headstart/bench/data/llm_configs/`, so
a machine with no model files and no network can run it) with random weights: the same shapes, so the
same cost per forward, whatever the weights say. The model is readied as `LLMEngine.load` readies a real
one (`headstart.llm.engine.prepare_model`, the precision `--dtype`/`--quantize` resolve to: float32 +
int8 layers on CPU, bfloat16 on CUDA by default) and driven through `LLMEngine`, so every figure is the
core's own call as a session makes it, argmax and device-to-host copy included:

- `prefill_300`: a cold prefill of a 300-token prompt (no incremental prefill);
- `chunk_8`: an 8-token incremental chunk on a cache holding those 300 (the end of turn, when the
  partials were prefilled while the user spoke);
- `decode`: one decode step after them;
- `verify_k`: a verify of k draft tokens (k = 2, 4, 8) in one forward (speculative decoding).

Stages take turns within each repeat (so a load change on a shared machine hits them alike), after
`--warmup` rounds that are not counted; CUDA is synchronised before and after each timed call. Reported:
min and median over `--repeats`, in ms.

The floor (`v2v_floor`) adds, in series, the final transcript pass, the end-of-turn signal, the LLM
until the first clause is complete (the chunk or the cold prompt, then `first_clause_tokens - 1` decode
steps) and the synthesiser's first audio, for each stack in `headstart/bench/data/v2v_floor.json`, which
holds the non-LLM figures and their sources. It leaves out the endpointer's silence (a policy, not a
cost) and any overlap of stages. A table, then one JSON line. Also `python -m headstart.cli.bench.stages`,
which imports neither the server nor the audio stack (for a GPU machine with only torch and transformers).
"""

from __future__ import annotations

import gc
import json
import math
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_PRESETS",
    "Floor",
    "StageTiming",
    "StagesBenchOptions",
    "build_engine",
    "count_parameters",
    "load_floor_data",
    "load_preset_config",
    "main",
    "measure_stages",
    "preset_names",
    "resolve_device",
    "v2v_floor",
]

DATA = Path(__file__).parent / "data"
CONFIGS = DATA / "llm_configs"
FLOOR_DATA = DATA / "v2v_floor.json"
DEFAULT_PRESETS = ("smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True, slots=True)
class StageTiming:
    """One stage's wall time per call in seconds: the fastest and the median of `runs` timed calls."""

    min_s: float
    median_s: float
    runs: int


@dataclass(frozen=True, slots=True)
class Floor:
    """A voice-to-voice floor in seconds: `low_s` (fast figures, min LLM costs, shortest first clause) and
    `high_s` (slow figures, median LLM costs, longest first clause), each the sum of its `parts`
    ({"asr", "eou", "llm", "tts"} -> seconds)."""

    low_s: float
    high_s: float
    parts_low: dict[str, float] = field(default_factory=dict)
    parts_high: dict[str, float] = field(default_factory=dict)


# -- the floor --------------------------------------------------------------------------------------


def _check_range(name: str, pair: Sequence[float]) -> tuple[float, float]:
    if len(pair) != 2:
        raise ValueError(f"{name} must be a (low, high) pair, got {pair!r}")
    low, high = (float(x) for x in pair)
    if not (math.isfinite(low) and math.isfinite(high)) or low < 0 or high < low:
        raise ValueError(f"{name} must be finite with 0 <= low <= high, got {pair!r}")
    return low, high


def v2v_floor(
    first_forward_s: Sequence[float],
    decode_s: Sequence[float],
    first_clause_tokens: Sequence[int],
    asr_s: Sequence[float],
    eou_s: Sequence[float],
    tts_s: Sequence[float],
) -> Floor:
    """The stages after the user's last word, in series: final transcript pass + end-of-turn signal + LLM
    + first audio. Every argument is a (low, high) pair: `first_forward_s` the forward that gives the
    first reply token (the incremental chunk, or a cold prefill) and `decode_s` one decode step (min and
    median), `first_clause_tokens` the tokens the first clause needs (the first comes from that forward,
    each other one costs a decode step), the rest seconds. The low floor pairs every low, the high
    floor every high. ValueError for a pair that is not finite, negative or has low > high, or a
    token count < 1."""
    first = _check_range("first_forward_s", first_forward_s)
    decode = _check_range("decode_s", decode_s)
    asr = _check_range("asr_s", asr_s)
    eou = _check_range("eou_s", eou_s)
    tts = _check_range("tts_s", tts_s)
    if len(first_clause_tokens) != 2:
        raise ValueError(f"first_clause_tokens must be a (low, high) pair, got {first_clause_tokens!r}")
    n_low, n_high = first_clause_tokens
    if any(isinstance(n, bool) or not isinstance(n, int) for n in (n_low, n_high)) or not 1 <= n_low <= n_high:
        raise ValueError(f"first_clause_tokens must be ints with 1 <= low <= high, got {first_clause_tokens!r}")
    parts = []
    for i, n in ((0, n_low), (1, n_high)):
        parts.append({"asr": asr[i], "eou": eou[i], "llm": first[i] + (n - 1) * decode[i], "tts": tts[i]})
    return Floor(sum(parts[0].values()), sum(parts[1].values()), parts[0], parts[1])


def load_floor_data(path: str | Path | None = None) -> dict:
    """The non-LLM stage figures (default `headstart/bench/data/v2v_floor.json`), checked: every figure
    has low_s <= high_s and a source, every combination names figures that exist. ValueError (naming the
    file and entry) otherwise; FileNotFoundError for a missing file."""
    path = Path(path) if path is not None else FLOOR_DATA
    data = json.loads(path.read_text(encoding="utf-8"))
    try:
        for group in ("asr_final_pass", "eou", "tts_first_audio"):
            for name, figure in data[group].items():
                _check_range(f"{group}.{name}", (figure["low_s"], figure["high_s"]))
                if not str(figure.get("source", "")).strip():
                    raise ValueError(f"{group}.{name} has no source")
        tokens = data["first_clause_tokens"]
        if not 1 <= int(tokens["low"]) <= int(tokens["high"]) or not tokens.get("source"):
            raise ValueError("first_clause_tokens needs 1 <= low <= high and a source")
        if not float(data["target_s"]["value"]) > 0 or not data["target_s"].get("source"):
            raise ValueError("target_s needs a positive value and a source")
        if not data["combinations"]:
            raise ValueError("no combinations")
        for combo in data["combinations"]:
            for group, key in (("asr_final_pass", "asr"), ("eou", "eou"), ("tts_first_audio", "tts")):
                if combo[key] not in data[group]:
                    raise ValueError(f"combination {combo['name']!r} names {key} {combo[key]!r}, not in {group}")
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: malformed floor data ({exc!r})") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return data


def floors(stages: Mapping[str, Mapping[str, StageTiming]], data: Mapping[str, Any]) -> list[dict]:
    """One row per preset x combination x LLM path ("incremental": the 8-token chunk, "cold": the whole
    prompt) from measured `stages` ({preset: {stage: StageTiming}}) and the floor `data`."""
    rows = []
    tokens = (int(data["first_clause_tokens"]["low"]), int(data["first_clause_tokens"]["high"]))
    target = float(data["target_s"]["value"])

    def pair(group: str, name: str) -> tuple[float, float]:
        figure = data[group][name]
        return float(figure["low_s"]), float(figure["high_s"])

    for preset, timings in stages.items():
        decode = (timings["decode"].min_s, timings["decode"].median_s)
        for combo in data["combinations"]:
            for path, stage in (("incremental", _chunk_stage(timings)), ("cold", _prefill_stage(timings))):
                first = (timings[stage].min_s, timings[stage].median_s)
                floor = v2v_floor(first, decode, tokens, pair("asr_final_pass", combo["asr"]),
                                  pair("eou", combo["eou"]), pair("tts_first_audio", combo["tts"]))
                rows.append({
                    "preset": preset, "combination": combo["name"], "llm_path": path, "first_forward": stage,
                    "low_s": round(floor.low_s, 4), "high_s": round(floor.high_s, 4),
                    "parts_low_s": {k: round(v, 4) for k, v in floor.parts_low.items()},
                    "parts_high_s": {k: round(v, 4) for k, v in floor.parts_high.items()},
                    "meets_target_low": floor.low_s <= target, "meets_target_high": floor.high_s <= target,
                })
    return rows


def _chunk_stage(timings: Mapping[str, StageTiming]) -> str:
    return next(name for name in timings if name.startswith("chunk_"))


def _prefill_stage(timings: Mapping[str, StageTiming]) -> str:
    return next(name for name in timings if name.startswith("prefill_"))


# -- building the models ----------------------------------------------------------------------------


def preset_names() -> list[str]:
    """The LLM presets whose config.json is packaged, in `DEFAULT_PRESETS` order, then any others."""
    present = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").is_file())
    return [p for p in DEFAULT_PRESETS if p in present] + [p for p in present if p not in DEFAULT_PRESETS]


def load_preset_config(preset: str) -> Any:
    """The transformers config of an LLM preset, from its packaged config.json (never the network).
    ValueError for a preset with no packaged config."""
    folder = CONFIGS / preset
    if not (folder / "config.json").is_file():
        raise ValueError(f"no packaged config for LLM preset {preset!r}; known: {', '.join(preset_names())}")
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder, local_files_only=True)


def count_parameters(preset: str) -> int:
    """The parameter count of preset `preset`'s architecture, built on the meta device (no memory, no
    weights). ValueError for a preset with no packaged config."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(load_preset_config(preset))
    return sum(p.numel() for p in model.parameters())


class _StubTokenizer:
    """What LLMEngine reads from a tokenizer when no tokenizer files are at hand: the end token ids."""

    unk_token_id = None
    chat_template = None

    def __init__(self, eos_token_id: int | list[int] | None) -> None:
        self.eos_token_id = eos_token_id

    def convert_tokens_to_ids(self, token: str) -> None:
        return None


def build_engine(preset: str, device: str, dtype: str = "auto", quantize: str | None = "auto",
                 seed: int = 0) -> Any:
    """An `LLMEngine` over preset `preset`'s architecture with random weights (seeded), on `device`
    ("cpu" or "cuda"), in the precision `dtype`/`quantize` resolve to there (`resolve_precision`),
    readied as a loaded model is (`prepare_model`). ValueError for an unknown preset or a precision
    that cannot run there (int8 off the CPU, ...)."""
    import torch
    from transformers import AutoModelForCausalLM

    from headstart.config import LLMConfig
    from headstart.llm.engine import LLMEngine, prepare_model
    from headstart.llm.precision import resolve_precision

    config = load_preset_config(preset)
    precision = resolve_precision(dtype, quantize, device)
    torch.manual_seed(seed)
    with torch.device(device):  # weights are created on the device: no host copy of a 1.5B model on CUDA
        model = AutoModelForCausalLM.from_config(config, dtype=precision.dtype)
    model = prepare_model(model, device, precision.quantize)
    llm_config = LLMConfig(model=preset, dtype=dtype, device=device,
                           quantize=precision.quantize if precision.quantize else "none")
    return LLMEngine(model, _StubTokenizer(getattr(config, "eos_token_id", None)), llm_config,
                     precision_note=precision.note)


def resolve_device(name: str) -> str:
    """"auto": "cuda" when torch sees a CUDA device, else "cpu"; "cpu"; "cuda" only when torch sees one.
    ValueError, saying why, for "cuda" without a CUDA device and for any other name."""
    import torch

    if name == "cpu":
        return "cpu"
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch build has no CUDA" if torch.version.cuda is None
                   else f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device")
            raise ValueError(f"--device cuda: {why}; use --device auto (CUDA only when present) or --device cpu")
        return "cuda"
    raise ValueError(f"unknown device {name!r}; use one of {', '.join(DEVICES)}")


# -- measuring --------------------------------------------------------------------------------------


def measure_stages(engine: Any, prompt_tokens: int = 300, chunk_tokens: int = 8, ks: Sequence[int] = (2, 4, 8),
                   repeats: int = 10, warmup: int = 2, seed: int = 0) -> dict[str, StageTiming]:
    """Time the core's calls on `engine` (an LLMEngine): {"prefill_300", "chunk_8", "decode",
    "verify_2", ...: StageTiming} (names carry the counts asked for). Token ids are random (seeded)
    in the model's vocabulary. Each round runs every stage once, in order; the first `warmup` rounds
    are not counted. The engine's cache is left empty. ValueError for counts < 1 (warmup < 0) or a
    prompt longer than the model's context."""
    for name, value in (("prompt_tokens", prompt_tokens), ("chunk_tokens", chunk_tokens), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    ks = list(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be ints >= 1, got {ks!r}")
    rng = random.Random(seed)
    draw = lambda n: [rng.randrange(engine.vocab_size) for _ in range(n)]  # noqa: E731
    prompt, chunk, draft = draw(prompt_tokens), draw(chunk_tokens), draw(max(ks))
    context = prompt + chunk
    if engine.max_positions is not None and len(context) + max(ks) > engine.max_positions:
        raise ValueError(f"{len(context) + max(ks)} positions exceed the model's context of {engine.max_positions}")
    sync = _synchronizer(engine)

    def argmax(logits: Any) -> Any:
        return logits.argmax(-1).tolist()  # the caller's greedy pick: a device-to-host copy

    stages: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        (f"prefill_{prompt_tokens}", engine.reset, lambda: argmax(engine.prefill(prompt))),
        (f"chunk_{chunk_tokens}", lambda: engine.sync_to(prompt), lambda: argmax(engine.prefill(context))),
        ("decode", lambda: engine.sync_to(context), lambda: argmax(engine.decode(draft[0]))),
    ]
    for k in ks:
        stages.append((f"verify_{k}", lambda: engine.sync_to(context),
                       lambda k=k: argmax(engine.verify(draft[:k]))))
    times: dict[str, list[float]] = {name: [] for name, _, _ in stages}
    for round_ in range(warmup + repeats):
        for name, setup, call in stages:
            setup()
            sync()
            start = time.perf_counter()
            call()
            sync()
            elapsed = time.perf_counter() - start
            if round_ >= warmup:
                times[name].append(elapsed)
    engine.reset()
    return {name: StageTiming(min(t), statistics.median(t), len(t)) for name, t in times.items()}


def _synchronizer(engine: Any) -> Callable[[], None]:
    import torch

    device = next(engine.model.parameters()).device
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


# -- the command ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StagesBenchOptions:
    """The options of `headstart bench stages`; their meaning and defaults: its `--help` (headstart/cli/)."""

    device: str
    presets: str
    dtype: str
    quantize: str
    repeats: int
    warmup: int
    threads: int
    prompt_tokens: int
    chunk_tokens: int
    ks: str
    seed: int
    floor_data: str | None
    json: bool


def main(args: StagesBenchOptions) -> int:
    def log(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    try:
        import torch
        import transformers
    except ImportError as exc:
        print(f"error: {exc.name or exc} is not importable by {sys.executable}: `headstart bench stages` needs "
              "torch and transformers (pip install torch transformers, or use a python that has them)",
              file=sys.stderr)
        return 3
    try:
        ks = _parse_ks(args.ks)
        presets = [p.strip() for p in args.presets.split(",") if p.strip()]
        if args.threads < 1 or args.repeats < 1 or args.warmup < 0:
            raise ValueError("--threads and --repeats must be >= 1, --warmup >= 0")
        unknown = [p for p in presets if p not in preset_names()]
        if not presets or unknown:
            raise ValueError(f"unknown LLM preset(s) {unknown or presets}; known: {', '.join(preset_names())}")
        device = resolve_device(args.device)
        data = load_floor_data(args.floor_data)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    results: dict[str, dict] = {}
    stages: dict[str, dict[str, StageTiming]] = {}
    for preset in presets:
        log(f"building {preset} (random weights) on {device}")
        start = time.perf_counter()
        try:
            engine = build_engine(preset, device, args.dtype, args.quantize, seed=args.seed)
            build_s = time.perf_counter() - start
            log(f"measuring {preset}: {args.warmup} warm-up + {args.repeats} timed rounds")
            timings = measure_stages(engine, args.prompt_tokens, args.chunk_tokens, ks, args.repeats,
                                     args.warmup, args.seed)
        except ValueError as exc:
            print(f"error: {preset}: {exc}", file=sys.stderr)
            return 2
        precision = _precision_label(engine)
        params = count_parameters(preset)
        stages[preset] = timings
        results[preset] = {
            "precision": precision, "params": int(params), "build_s": round(build_s, 2),
            "stages_ms": {name: {"min": round(t.min_s * 1e3, 3), "median": round(t.median_s * 1e3, 3)}
                          for name, t in timings.items()},
        }
        del engine
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    result = {
        "bench": "stages",
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device == "cuda" else _cpu_model(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "threads": args.threads,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "prompt_tokens": args.prompt_tokens,
        "chunk_tokens": args.chunk_tokens,
        "ks": ks,
        "presets": results,
        "target_s": float(data["target_s"]["value"]),
        "first_clause_tokens": [int(data["first_clause_tokens"]["low"]), int(data["first_clause_tokens"]["high"])],
        "floor": floors(stages, data),
        "floor_data": {group: {name: [f["low_s"], f["high_s"]] for name, f in data[group].items()}
                       for group in ("asr_final_pass", "eou", "tts_first_audio")},
        "commit": _commit(),
        "cpu": _cpu(),
    }
    if not args.json:
        print_report(result)
    print(json.dumps(result))
    return 0


def print_report(result: Mapping[str, Any]) -> None:
    """The tables of a `main` result."""
    cpu = result["cpu"]
    print(f"\nLLM core stage costs on {result['device']} ({result['device_name']}); torch {result['torch']}, "
          f"transformers {result['transformers']}, python {result['python']}, {result['threads']} CPU thread(s); "
          f"commit {result['commit'] or 'unknown'}")
    print(f"CPU {cpu.get('model')} ({', '.join(cpu.get('flags', [])) or 'no AVX2 flags'}), "
          f"load average {cpu.get('load_avg_1m')}; random weights, same shapes as each preset; "
          f"{result['repeats']} timed rounds after {result['warmup']} warm-up(s), ms min / median\n")
    names = list(next(iter(result["presets"].values()))["stages_ms"])
    header = f"{'preset':<20}{'precision':<14}{'params':>8}" + "".join(f"{n:>18}" for n in names)
    print(header)
    for preset, r in result["presets"].items():
        cells = "".join(f"{_ms(s['min'])} / {_ms(s['median'])}".rjust(18) for s in r["stages_ms"].values())
        print(f"{preset:<20}{r['precision']:<14}{r['params'] / 1e6:>7.0f}M{cells}")
    print("\nverify k tokens / one decode step (medians; a verify step yields its accepted tokens + 1, so "
          "speculation pays while that exceeds the ratio, drafting cost aside):")
    for preset, r in result["presets"].items():
        s = r["stages_ms"]
        ratios = ", ".join(f"k={n.split('_')[1]}: {s[n]['median'] / s['decode']['median']:.2f}x"
                           for n in s if n.startswith("verify_"))
        print(f"  {preset}: {ratios}")
    low, high = result["first_clause_tokens"]
    print(f"\nvoice-to-voice floor after the last word (s), stages in series: ASR final pass + EOU + LLM "
          f"(first forward + decode steps to a {low}-{high}-token first clause) + first audio; "
          f"low = fast figures and min costs, high = slow figures and median costs; "
          f"target <= {result['target_s']} s. Non-LLM figures: headstart/bench/data/v2v_floor.json (CPU, 1 thread)")
    print(f"{'preset':<20}{'stack':<30}{'LLM path':<13}{'ASR':>12}{'EOU':>12}{'LLM':>14}{'TTS':>12}"
          f"{'floor':>16}{'<= target':>11}")
    for row in result["floor"]:
        lo, hi = row["parts_low_s"], row["parts_high_s"]
        cells = "".join(f"{lo[k]:.3f}-{hi[k]:.3f}".rjust(w) for k, w in (("asr", 12), ("eou", 12), ("llm", 14),
                                                                       ("tts", 12)))
        meets = "yes" if row["meets_target_high"] else "low only" if row["meets_target_low"] else "no"
        floor = f"{row['low_s']:.3f}-{row['high_s']:.3f}"
        print(f"{row['preset']:<20}{row['combination']:<30}{row['llm_path']:<13}{cells}{floor:>16}{meets:>11}")
    print()


def _parse_ks(text: str) -> list[int]:
    try:
        ks = [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1:
        raise ValueError(f"--ks must be comma-separated ints >= 1, got {text!r}")
    return ks


def _ms(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _precision_label(engine: Any) -> str:
    name = str(engine.dtype).removeprefix("torch.")
    return f"{name}+{engine.quantize}" if engine.quantize else name


def _cpu_model() -> str:
    return _cpu().get("model", "unknown")


def _cpu() -> dict:
    from headstart.bench.machine import cpu_description

    return cpu_description()


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None

