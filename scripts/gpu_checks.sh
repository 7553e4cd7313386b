#!/usr/bin/env bash
# The GPU checks issues 7, 8, 9 and 10 ask for, in parts that each fit a 10-minute machine call:
#   scripts/gpu_checks.sh tests | truth | experiments | overheads
# Each part writes its logs and JSON under $OUT (default ./gpu-results). Needs torch with CUDA,
# torchvision, nvidia-ml-py and platformdirs importable (PYTHONPATH may point at unpacked wheels).
set -uo pipefail
case "${1:-}" in tests|truth|experiments|overheads) ;; *) echo "usage: $0 tests|truth|experiments|overheads" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-results}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 WORKBENCH_HOME=${WORKBENCH_HOME:-/tmp/workbench-gpu-home}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
case "${1:-}" in
  tests)  # issue 7's timeline tests, 9's real OOM and 20 runs, 10's one-rank NCCL run, 8's max-batch release
    timeout 560 python -m pytest -q -rA -m gpu tests -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.log" | tail -40 ;;
  truth)  # issue 7: old event span vs kernel-busy vs NVML utilisation, ceiling, efficiency, sampling cost
    timeout 560 python benchmarks/gpu_time_truth.py --steps 200 --ceiling-budget 8 \
      --out "$OUT/gpu_time_truth.json" 2>&1 | tee "$OUT/gpu_time_truth.log" | tail -20 ;;
  experiments)  # issue 8: largest batch (fp32, bf16) and a search from the default settings
    for precision in fp32 bf16; do
      timeout 170 python -m workbench max-batch --model resnet18 --precision "$precision" --json \
        > "$OUT/max_batch_$precision.log" 2>&1; echo "max-batch $precision rc=$?"; tail -2 "$OUT/max_batch_$precision.log"
    done
    timeout 200 python -m workbench tune --budget-seconds 150 --json > "$OUT/tune.log" 2>&1
    echo "tune rc=$?"; tail -2 "$OUT/tune.log" ;;
  overheads)  # issue 8's matrix and engine overhead, issue 10's devices=1 ratio, issue 7's sampling cost
    timeout 230 python benchmarks/gpu_matrix.py --budget-seconds 180 --out "$OUT/gpu_matrix.json" 2>&1 | tail -25
    timeout 120 python benchmarks/engine_overhead.py --budget-seconds 90 --out "$OUT/engine_overhead.json" 2>&1 | tail -8
    timeout 120 python benchmarks/distributed_overhead.py --out "$OUT/distributed_overhead.json" 2>&1 | tail -8
    timeout 100 python benchmarks/profile_overhead.py --out "$OUT/profile_overhead.json" 2>&1 | tail -8 ;;
esac
