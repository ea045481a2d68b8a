#!/usr/bin/env bash
# One call for a machine with a CUDA GPU: the LLM core's CUDA unit tests, then
# its stage costs on the device (`headstart bench stages`: every LLM preset built from its packaged
# config with random weights) and the voice-to-voice floor they give with the CPU-measured ASR, EOU and
# TTS figures (headstart/bench/data/v2v_floor.json). Needs only this tree and a python with torch and
# transformers (and pytest for the tests): no network, no pip, no model files.
#
#   usage: scripts/gpu_check.sh [--device auto|cpu|cuda] [more `bench stages` options]
#   a lent GPU session:  bash scripts/gpu_check.sh --device cuda
#
# The python: $PYTHON if set; else the first of python3 and .venv/bin/python whose torch sees CUDA; else
# the first that imports torch and transformers. GPU_CHECK_TESTS overrides the pytest arguments (default:
# the core's device tests, CUDA cases only: `-k cuda`; on a machine without CUDA they all skip). Where
# $OUT is set, the log and the JSON line are written there too. Exit status: 0 when the tests passed (or
# all skipped) and the bench ran; 1 when either failed; 3 when no usable python was found.
set -uo pipefail
cd "$(dirname "$0")/.."

have() { "$1" -c 'import torch, transformers' >/dev/null 2>&1; }
cuda() { "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; }

if [ -n "${PYTHON:-}" ]; then
  candidates=("$PYTHON")
else
  candidates=()
  command -v python3 >/dev/null 2>&1 && candidates+=("$(command -v python3)")
  [ -x .venv/bin/python ] && candidates+=(.venv/bin/python)
fi
PY=""
for c in "${candidates[@]}"; do if have "$c" && cuda "$c"; then PY="$c"; break; fi; done
if [ -z "$PY" ]; then for c in "${candidates[@]}"; do if have "$c"; then PY="$c"; break; fi; done; fi
if [ -z "$PY" ]; then
  echo "gpu_check: no python with torch and transformers found (tried: ${candidates[*]:-none})." >&2
  for c in "${candidates[@]}"; do
    echo "  $c: $("$c" -c 'import torch, transformers' 2>&1 | tail -1)" >&2
  done
  echo "gpu_check: set PYTHON=/path/to/python (one whose torch sees the GPU); this script installs nothing." >&2
  exit 3
fi

LOG=/dev/null
if [ -n "${OUT:-}" ] && mkdir -p "$OUT" 2>/dev/null; then LOG="$OUT/gpu_check.log"; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # nothing here may reach a hub

{
  echo "== gpu_check $(date -u +%FT%TZ) on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "python: $PY"
  "$PY" -c 'import platform, torch, transformers; print("python", platform.python_version(), "| torch", torch.__version__, "(CUDA", torch.version.cuda, ") | transformers", transformers.__version__); print("CUDA device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
} 2>&1 | tee -a "$LOG"

status=0
echo "== 1/2 the LLM core's CUDA unit tests" | tee -a "$LOG"
if "$PY" -c 'import pytest' >/dev/null 2>&1; then
  # shellcheck disable=SC2086  # GPU_CHECK_TESTS is a list of words on purpose
  "$PY" -m pytest -q -rs -p no:cacheprovider ${GPU_CHECK_TESTS:-tests/test_llm_device.py tests/test_llm_speculative.py tests/test_bench_stages.py -k cuda} 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "gpu_check: the unit tests failed (pytest exit $rc)" | tee -a "$LOG"; status=1; }
else
  echo "gpu_check: pytest is not importable by $PY: the unit tests were NOT run" | tee -a "$LOG"; status=1
fi

echo "== 2/2 stage costs and the voice-to-voice floor" | tee -a "$LOG"
"$PY" -m headstart.cli.bench.stages "$@" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "gpu_check: the stage bench failed (exit $rc)" | tee -a "$LOG"; status=1; }
if [ "$LOG" != /dev/null ]; then grep '^{"bench": "stages"' "$LOG" | tail -1 > "$OUT/stages.json"; fi
echo "== gpu_check done: $([ $status -eq 0 ] && echo ok || echo FAILED)" | tee -a "$LOG"
exit $status
