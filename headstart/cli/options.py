"""The command-line options shared by the entry points that load the pipeline (`headstart demo`,
`serve`, `mic --local`, `bench llm | answers | conversation`, the trainers), and the PipelineConfig they build.

Each shared flag is declared here once. Configs are frozen and built only at the entry points: the
layers below take the configs and option records this command line builds, never a parser.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from typing import Any, TypeVar

from headstart.config import (
    ASRConfig,
    LLMConfig,
    PipelineConfig,
    SessionConfig,
    ThreadPlan,
    TTSConfig,
)

Options = TypeVar("Options")

# Where the pipeline runs, as the help of `--asr`, `--llm` and `--tts` says it:
# (prefix of the ASR and LLM help, its suffix, prefix of the TTS help).
_SCOPES = {
    "": ("", "", ""),
    "server": ("", " (server-side only)", "server-side: "),
    "local": ("with --local: ", "", "with --local: "),
}


def add_pipeline_arguments(parser: argparse.ArgumentParser, scope: str = "", head_start: bool = True) -> None:
    """The flags `build_config` reads, as `headstart demo`, `serve`, `mic` and `bench conversation` take
    them: `--asr`, `--llm`, `--tts` and `--coqui-model`, `--max-new-tokens`, `--max-history-tokens`, `--memory`,
    `--torch-threads`, `--llm-dtype`, `--llm-quantize` and the head-start switches (`head_start`; `bench
    conversation` switches them per configuration instead).

    `scope`: "" (this process), "server" (`serve`: the models are the server's; `--llm` may name a
    serving engine) or "local" (`mic`: with --local only). KeyError for another scope."""
    before, after, tts_prefix = _SCOPES[scope]
    remote = ", or a serving engine: openai://HOST:PORT/MODEL" if scope == "server" else ""
    parser.add_argument("--asr", default=ASRConfig().model, help=f"{before}ASR preset, folder or hub id{after}")
    parser.add_argument("--llm", default=LLMConfig().model, help=f"{before}LLM preset, folder or hub id{remote}{after}")
    add_tts_argument(parser, tts_prefix)
    parser.add_argument("--max-new-tokens", type=int, default=LLMConfig().max_new_tokens)
    add_history_argument(parser)
    parser.add_argument("--torch-threads", type=int, default=ThreadPlan().torch_threads)
    add_llm_precision_arguments(parser)
    if head_start:
        add_head_start_argument(parser)


def add_threads_argument(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """`--threads N` (default: ThreadPlan's one thread), as the benchmarks and trainers take it; `help`
    says which library's threads."""
    parser.add_argument("--threads", type=int, default=ThreadPlan().torch_threads, help=help)


def options_from_args(cls: type[Options], args: argparse.Namespace, **extra: Any) -> Options:
    """The option record `cls` (a dataclass whose field names are the parser's dests) filled from `args`,
    with `extra` for the fields the parser does not hold (a built PipelineConfig). Repeatable flags
    (lists) become tuples. TypeError when a field has no value."""
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in extra and hasattr(args, f.name):
            value = getattr(args, f.name)
            values[f.name] = tuple(value) if isinstance(value, list) else value
    values.update(extra)
    return cls(**values)


def add_tts_argument(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """`--tts` and `--coqui-model`, as demo, serve, mic and bench conversation take them."""
    parser.add_argument("--tts", default=TTSConfig().engine, help=f"{prefix}TTS engine: hibari (default), "
                        "piper-joe, espeak, coqui (with --coqui-model) or the path of a Piper .onnx voice")
    parser.add_argument("--coqui-model", default=None, metavar="PATH",
                        help=f"{prefix}with --tts coqui: a coqui-tts checkpoint (XTTS-v2 folder or VITS .pth), run "
                        "in the coqui environment `make coqui-env` builds")


def add_llm_precision_arguments(parser: argparse.ArgumentParser, bench: bool = False) -> None:
    """`--llm-dtype` and `--llm-quantize`, as every entry point that loads the LLM takes them
    (`headstart.llm.precision`: "auto" is float32 with int8 layers on CPU). `bench`: the benchmarks'
    form, stored as `args.dtype` / `args.quantize` and also spelt `--dtype` / `--quantize`."""
    from headstart.llm.precision import DTYPE_CHOICES, QUANTIZE_CHOICES

    names = (("--llm-dtype", "--dtype"), ("--llm-quantize", "--quantize")) if bench else (("--llm-dtype",), ("--llm-quantize",))
    dests = ("dtype", "quantize") if bench else ("llm_dtype", "llm_quantize")
    parser.add_argument(*names[0], dest=dests[0], choices=DTYPE_CHOICES, default=LLMConfig().dtype,
                        help="the LLM's dtype; auto (default): float32 on CPU (with --llm-quantize auto: int8 "
                        "layers, the fast and exact path on every CPU), bfloat16 on a GPU")
    parser.add_argument(*names[1], dest=dests[1], choices=QUANTIZE_CHOICES, default=LLMConfig().quantize,
                        help="int8 Linear layers for the LLM (CPU, float32 only); auto (default): int8 where the "
                        "LLM runs in float32 on a CPU with AVX2 or AVX-512; none: off")


def llm_precision_from_args(args: argparse.Namespace, base: LLMConfig) -> dict:
    """The LLMConfig fields `add_llm_precision_arguments` set (for `dataclasses.replace`)."""
    return {"dtype": getattr(args, "llm_dtype", None) or base.dtype,
            "quantize": getattr(args, "llm_quantize", base.quantize)}


def add_history_argument(parser: argparse.ArgumentParser) -> None:
    """`--max-history-tokens` and `--memory`, as every entry point that holds a conversation takes them
    (`LLMConfig.max_history_tokens`, headstart/llm/history.py; `LLMConfig.memory`, headstart/llm/memory.py)."""

    def setting(text: str):
        from headstart.llm.history import parse_history_setting

        try:
            return parse_history_setting(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parser.add_argument("--max-history-tokens", type=setting, default=LLMConfig().max_history_tokens,
                        metavar="N|auto|none",
                        help="the conversation kept in the LLM's prompt, in tokens: past it, whole old turns "
                        "are dropped (down to 75 %%); auto (default): what fits the model's context besides the "
                        "reply; none: keep everything (a long conversation then outgrows the context)")

    def memory(text: str) -> str:
        from headstart.llm.memory import parse_memory_setting

        try:
            return parse_memory_setting(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parser.add_argument("--memory", type=memory, default=LLMConfig().memory, metavar="off|window|summary",
                        help="what a long conversation keeps of the turns past --max-history-tokens: window "
                        "drops whole old turns; summary has the LLM compact them into short notes while it is "
                        f"idle (frozen once written); off keeps everything (default {LLMConfig().memory}; "
                        "docs/llm.md \"Long conversations\")")


def add_head_start_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-head-start", action="store_true", help="no incremental prefill and no "
                        "preemptive reply before the end of turn (for comparisons)")
    parser.add_argument("--no-incremental-prefill", action="store_true",
                        help="partial transcripts do not prefill the KV cache (ablation)")
    parser.add_argument("--no-preemptive", action="store_true",
                        help="no held reply before the end of turn (ablation)")
    parser.add_argument("--eou", choices=("auto", "head", "token", "llm", "none"), default=SessionConfig().eou,
                        help="end-of-utterance signal for endpointing and the head start: a trained head on "
                        "the LLM's hidden state (head), the LLM's end-of-turn token probability (token, alias "
                        "llm), auto (head where this LLM has one, else token) or none (punctuation, fixed "
                        "silence); default: auto")
    add_tools_argument(parser)


def add_tools_argument(parser: argparse.ArgumentParser) -> None:
    """`--tools / --no-tools`, as `demo`, `serve`, `mic --local` and `bench answers` take it: stored as
    `args.tools`, None when neither is given (the default, on: `session_config_from_args`)."""
    parser.add_argument("--tools", action=argparse.BooleanOptionalAction, default=None,
                        help="local tools answer what they serve: the time and date, timers and alarms, lists, a "
                        "calculator, unit conversion (docs/tools.md); on by default, --no-tools: every reply is "
                        "the LLM's")


def session_config_from_args(args: argparse.Namespace, base: SessionConfig | None = None) -> SessionConfig:
    """The SessionConfig the head-start flags of `add_head_start_argument` ask for."""
    return replace(base or SessionConfig(), head_start=not getattr(args, "no_head_start", False),
                   incremental_prefill=not getattr(args, "no_incremental_prefill", False),
                   preemptive=not getattr(args, "no_preemptive", False),
                   eou=getattr(args, "eou", None) or SessionConfig().eou,
                   tools=_given(getattr(args, "tools", None), (base or SessionConfig()).tools))


def _given(flag: bool | None, default: bool) -> bool:
    """A `--x / --no-x` flag's value, or `default` when neither was given."""
    return default if flag is None else flag


def build_config(args: argparse.Namespace) -> PipelineConfig:
    """The PipelineConfig the flags of `headstart demo`, `serve` and `mic --local` ask for: `args` holds
    `asr`, `llm`, `tts`, `max_new_tokens` and `torch_threads`, and optionally the flags of the helpers above."""
    base = PipelineConfig()
    return replace(
        base,
        threads=replace(base.threads, torch_threads=args.torch_threads),
        asr=replace(base.asr, model=args.asr),
        llm=replace(base.llm, model=args.llm, max_new_tokens=args.max_new_tokens,
                    max_history_tokens=getattr(args, "max_history_tokens", base.llm.max_history_tokens),
                    memory=getattr(args, "memory", base.llm.memory),
                    **llm_precision_from_args(args, base.llm)),
        tts=replace(base.tts, engine=args.tts, coqui_model=getattr(args, "coqui_model", None) or base.tts.coqui_model),
        session=session_config_from_args(args, base.session),
    )
