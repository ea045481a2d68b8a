"""The torch devices the LLM core's tests run on: always "cpu", and "cuda" where torch sees a CUDA device
(skipped, with the reason, elsewhere). `scripts/gpu_check.sh` runs the "cuda" cases (`-k cuda`)."""

from __future__ import annotations

import pytest
import torch

CUDA = pytest.param(
    "cuda", id="cuda",
    marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch"),
)
DEVICES = ["cpu", CUDA]


def tolerance(device: str) -> dict[str, float]:
    """assert_close tolerances for float32 logits: CUDA kernels differ by shape in the last bits, and
    cuBLAS/SDPA may pick another algorithm for a 1-row than for an n-row forward."""
    return {"rtol": 1e-5, "atol": 1e-5} if device == "cpu" else {"rtol": 1e-4, "atol": 1e-4}
