#!/usr/bin/env bash
# One command for a machine with a CUDA GPU: prepare the model, train the proposal head (on CPU, minutes),
# then `headstart bench partial` on the GPU in float32 (exactness meaningful) and bfloat16.
# UNTESTED ON A GPU: the machine this was written on has none (docs/partial-layer.md).
#   usage: scripts/gpu_bench_partial.sh [MODEL] [EXIT_LAYER] [K]
set -euo pipefail
MODEL="${1:-qwen2.5-coder-0.5b}"
LAYER="${2:-6}"
K="${3:-4}"
PY="${PYTHON:-python}"
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device visible to torch')"
"$PY" -m headstart models prepare "$MODEL"
"$PY" -m headstart llm train-proposal --model "$MODEL" --exit-layer "$LAYER" --threads "$(nproc)"
for DTYPE in float32 bfloat16; do
  "$PY" -m headstart bench partial --model "$MODEL" --exit-layer "$LAYER" --k "$K" --device cuda --dtype "$DTYPE" \
    --decode-tokens 64 --thresholds 0.5,0.7,0.9
done
