"""Is torch's int4 weight-only CPU matmul a faster, exact alternative to the LLM's int8 layers here?

One Linear of qwen2.5-coder-1.5b's MLP shape (1536 -> 8960, random weights): the ms per call of one
token through `RowInt8Linear` (headstart/llm/int8.py, the default) and through torch's int4 kernel
(`_weight_int4pack_mm_for_cpu`, group size 128, asymmetric per group) in float32 and bfloat16, and
whether the int4 output rows are batch-invariant (4 tokens at once equal to 4 one-token calls: what the
exactness self-test needs). Decode is bound by reading the weights, so int4 halves the bytes per token
against int8; it only pays where the kernel keeps up.

    .venv/bin/python scripts/int4_matmul_check.py [--threads N]

Prints one line per path, then one JSON line. Measured figures: docs/llm.md "The 1.5b's decode".
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from headstart.llm.int8 import RowInt8Linear

IN_FEATURES, OUT_FEATURES, GROUP = 1536, 8960, 128


def per_call_ms(fn, x: torch.Tensor, calls: int = 40) -> float:
    fn(x)
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    linear = torch.nn.Linear(IN_FEATURES, OUT_FEATURES, bias=False)
    weight = linear.weight.detach()
    groups = weight.reshape(OUT_FEATURES, IN_FEATURES // GROUP, GROUP)
    low, high = groups.amin(-1, keepdim=True), groups.amax(-1, keepdim=True)
    scale = ((high - low) / 15).clamp_min(1e-8)
    codes = ((groups - low) / scale).round().clamp(0, 15).to(torch.int32).reshape(OUT_FEATURES, IN_FEATURES)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1)
    # the kernel computes (code - 8) * scale + zero: the group's minimum moves by 8 steps
    scales_zeros = torch.stack([scale.reshape(OUT_FEATURES, -1).t(), (low + 8 * scale).reshape(OUT_FEATURES, -1).t()],
                               dim=-1).contiguous()
    result: dict = {"shape": [IN_FEATURES, OUT_FEATURES], "threads": args.threads}
    x = torch.randn(1, IN_FEATURES)
    result["int8_ms"] = round(per_call_ms(RowInt8Linear(linear), x), 3)
    print(f"int8 (RowInt8Linear)      {result['int8_ms']:.3f} ms per token")
    reference = x @ weight.t()
    for dtype in (torch.float32, torch.bfloat16):
        name = str(dtype).removeprefix("torch.")
        sz = scales_zeros.to(dtype)

        def int4(v: torch.Tensor, sz: torch.Tensor = sz) -> torch.Tensor:
            return torch.ops.aten._weight_int4pack_mm_for_cpu(v, packed, GROUP, sz)

        xd = x.to(dtype)
        ms = per_call_ms(int4, xd)
        error = float((int4(xd).float() - reference).norm() / reference.norm())
        batch = torch.randn(4, IN_FEATURES, dtype=dtype)
        invariant = torch.equal(int4(batch), torch.cat([int4(batch[i : i + 1]) for i in range(4)]))
        result[f"int4_{name}_ms"] = round(ms, 3)
        result[f"int4_{name}_rel_error"] = round(error, 4)
        result[f"int4_{name}_batch_invariant"] = invariant
        print(f"int4 ({name:<8})          {ms:.3f} ms per token, relative error {error:.3f}, "
              f"batch-invariant {invariant}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
