"""The LLM's numeric precision: which dtype and which quantisation a config asks for on this machine.

One rule on every CPU (docs/llm.md, "Precision"): `dtype="auto"` is float32 activations with the
project's own int8 Linear layers (`headstart.llm.int8`), whatever bf16 support the CPU reports. That
path is both the fastest measured on AVX2-only and on AVX-512 VNNI/BF16 CPUs and the exact one: a
k-token verify and a chunked prefill compute each token bit-identically to one-token steps, so
speculative decoding, incremental prefill and the preemptive hit keep plain greedy's tokens. bfloat16
runs only when asked for. On a CPU whose vector features cannot run the int8 kernels (fbgemm needs
AVX2; without it `quantized::linear_dynamic` dies with SIGILL), "auto" falls back to plain float32 and
says why, and an explicit "int8" is refused before any model loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "DTYPE_CHOICES",
    "QUANTIZE_CHOICES",
    "Precision",
    "check_quantize",
    "cpu_capability",
    "int8_unsupported_reason",
    "resolve_dtype",
    "resolve_precision",
    "resolve_quantize",
]

# the command-line choices (`--llm-dtype`, `--llm-quantize`); "none" and None both mean no quantisation
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
QUANTIZE_CHOICES = ("auto", "int8", "none")
QUANTIZE_MODES = ("int8",)
# torch's runtime vector capability on which fbgemm's int8 kernels run
_INT8_CAPABILITIES = ("AVX2", "AVX512")


@dataclass(frozen=True, slots=True)
class Precision:
    """What a model will be loaded as: `dtype` (torch dtype of weights and activations), `quantize`
    ("int8" or None) and `note` (why "auto" did not take the int8 path on this machine, else None)."""

    dtype: torch.dtype
    quantize: str | None
    note: str | None = None

    @property
    def label(self) -> str:
        """e.g. "float32+int8", "bfloat16"."""
        name = str(self.dtype).removeprefix("torch.")
        return f"{name}+{self.quantize}" if self.quantize else name


def cpu_capability() -> str:
    """torch's runtime CPU vector capability: "AVX512", "AVX2", "DEFAULT" on x86 ("NEON", "SVE256",
    ... elsewhere). The environment variable ATEN_CPU_CAPABILITY can lower it."""
    import torch

    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return "unknown"


def int8_unsupported_reason() -> str | None:
    """None when this CPU runs the int8 kernels (x86 with AVX2 or AVX-512), else why not."""
    import torch

    capability = cpu_capability()
    if capability not in _INT8_CAPABILITIES:
        return (f"this CPU's vector capability is {capability}; the int8 kernels (fbgemm) need AVX2 or "
                "AVX-512")
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        return "this torch build has no fbgemm int8 kernels"
    return None


def resolve_dtype(name: str, device: str = "cpu") -> torch.dtype:
    """The torch dtype for a config name. "auto": float32 on CPU (the int8 layers take float32
    activations; bf16 was measured slower and inexact there, docs/llm.md) and bfloat16 on other
    devices. ValueError for a name that is not a floating-point torch dtype."""
    import torch

    if name == "auto":
        return torch.float32 if device == "cpu" else torch.bfloat16
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"unknown floating-point dtype {name!r}; use one of {DTYPE_CHOICES}")
    return dtype


def resolve_quantize(mode: str | None, dtype: str = "auto", device: str = "cpu") -> str | None:
    """The quantisation for a config value (`LLMConfig.quantize` or `draft_quantize`), the model's
    dtype name and device: "auto" is "int8" where the model runs in float32 on a CPU that has the
    int8 kernels, else None; None and "none" are None; any other value is returned as is
    (`resolve_precision` checks it). ValueError for an unknown dtype name (only when resolving "auto")."""
    return _resolve(mode, dtype, device)[0]


def resolve_precision(dtype: str, quantize: str | None, device: str = "cpu") -> Precision:
    """Resolve and check an LLM config's `dtype` and `quantize` for this machine, before any model
    loads. Raises ValueError, naming the flag to change, for an unknown dtype or mode, int8 with a
    dtype other than float32 or off the CPU, and int8 on a CPU without the int8 kernels."""
    resolved_dtype = resolve_dtype(dtype, device)
    mode, note = _resolve(quantize, dtype, device)
    check_quantize(mode, resolved_dtype, device)
    return Precision(resolved_dtype, mode, note if mode is None else None)


def check_quantize(mode: str | None, dtype: torch.dtype, device: str) -> None:
    """Raise ValueError, naming the flag to change, unless quantisation `mode` (None: none) can run
    on a model of `dtype` on `device` on this machine."""
    import torch

    if mode is None:
        return
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"unknown quantize mode {mode!r}; use one of {QUANTIZE_CHOICES} (--llm-quantize)")
    if dtype != torch.float32:
        raise ValueError(f"quantize={mode!r} needs dtype float32 (the int8 kernels take float32 activations), "
                         f"got {dtype}; use --llm-dtype float32 (or --llm-quantize none)")
    if device != "cpu":
        raise ValueError(f"quantize={mode!r} runs on CPU only, got device {device!r}; use --llm-quantize none")
    reason = int8_unsupported_reason()
    if reason is not None:
        raise ValueError(f"quantize={mode!r} cannot run here: {reason}; use --llm-quantize none")


def _resolve(mode: str | None, dtype: str, device: str) -> tuple[str | None, str | None]:
    import torch

    if mode is None or mode == "none":
        return None, None
    if mode != "auto":
        return mode, None
    if device != "cpu" or resolve_dtype(dtype, device) != torch.float32:
        return None, None
    reason = int8_unsupported_reason()
    if reason is not None:
        return None, f"int8 off, plain float32: {reason}"
    return "int8", None
