"""The machine a benchmark ran on: the CPU model, the vector features that change which LLM path is
fastest (avx2, avx512_vnni, avx512_bf16, amx), torch's runtime capability and the load average.

Every benchmark's JSON line carries it, so a figure always says which CPU it comes from.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["FEATURES_THAT_MATTER", "cpu_description"]

FEATURES_THAT_MATTER = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_description(cpuinfo: str | None = None) -> dict:
    """{"model": str, "flags": [the FEATURES_THAT_MATTER present], "torch_capability": str,
    "cores": int, "load_avg_1m": float | None}. `cpuinfo`: the text of /proc/cpuinfo (read when None;
    where there is none the model falls back to `platform.processor()` and flags are empty)."""
    from headstart.llm.precision import cpu_capability

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    model, flags = "", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    try:
        load = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        load = None
    return {"model": model or platform.processor() or "unknown",
            "flags": [f for f in FEATURES_THAT_MATTER if f in flags],
            "torch_capability": cpu_capability(), "cores": os.cpu_count() or 0, "load_avg_1m": load}
