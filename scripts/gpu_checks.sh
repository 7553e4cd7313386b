#!/usr/bin/env bash
# The GPU checks issues 7, 8, 9 and 10 ask for, in parts that each fit a 10-minute machine call:
#   scripts/gpu_checks.sh tests | truth | max-batch [fp32|bf16] | tune-matrix | overheads | ddp
# (tests/gui is left out: the GPU machine has no PySide6, and no GUI test needs a GPU.)
# Each part writes its logs and JSON under $OUT (default ./gpu-results) and exits with the first failing
# command's status (0 when all passed; 2 for bad arguments). Needs torch with CUDA,
# torchvision, nvidia-ml-py and platformdirs importable (PYTHONPATH may point at unpacked wheels).
# Times seen on an H100 (16 cores): tests ~4.5 min, truth ~4 min with --steps 150 --ceiling-budget 6,
# each max-batch 3-4 min (a trial near the memory limit takes 20-40 s: cuDNN autotunes every new size).
set -uo pipefail
USAGE="usage: $0 tests|truth|max-batch [fp32|bf16]|tune-matrix|overheads|ddp"
case "${1:-}" in tests|truth|max-batch|tune-matrix|overheads|ddp) ;; *) echo "$USAGE" >&2; exit 2 ;; esac
case "$#/${1}/${2:-}" in 1/*|2/max-batch/fp32|2/max-batch/bf16) ;; *) echo "$USAGE" >&2; exit 2 ;; esac
OUT=$(realpath -m "${OUT:-gpu-results}")  # before the cd: a relative $OUT is the caller's
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 WORKBENCH_HOME=${WORKBENCH_HOME:-/tmp/workbench-gpu-home}
# No GPU: every gpu test would skip and the part would look passed.
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || exit 1
rc=0
keep() { local code=$?; [ "$rc" -ne 0 ] || rc=$code; }  # after each command: the first failure's status
case "${1:-}" in
  tests)  # issue 7's timeline tests, 9's real OOM and 20 runs, 10's one-rank NCCL run, 8's max-batch release
    timeout 560 python -m pytest -q -rA -m gpu tests/engine tests/experiments tests/history -p no:cacheprovider \
      2>&1 | tee "$OUT/pytest_gpu.log" | tail -40; keep ;;
  truth)  # issue 7: old event span vs kernel-busy vs NVML utilisation, ceiling, efficiency, sampling cost
    timeout 560 python benchmarks/gpu_time_truth.py --steps 150 --ceiling-budget 6 \
      --out "$OUT/gpu_time_truth.json" 2>&1 | tee "$OUT/gpu_time_truth.log" | tail -20; keep ;;
  max-batch)  # issue 8: the largest batch, fp32 and bf16 (or the one named after the part), data on the GPU
    # Both in one call leave each 270 s, which the exact search (14 bisections past 16,384) can outrun:
    # `max-batch fp32` and `max-batch bf16` in two calls give each 560 s.
    precisions=${2:-fp32 bf16}
    limit=$([ "$precisions" = "fp32 bf16" ] && echo 270 || echo 560)
    for precision in $precisions; do
      timeout "$limit" python -m workbench max-batch --model resnet18 --precision "$precision" --pipeline gpu-resident \
        --augment gpu --batch-size 4096 --steps-per-trial 3 --json > "$OUT/max_batch_$precision.log" 2>&1
      keep; echo "max-batch $precision rc=$rc"; tail -3 "$OUT/max_batch_$precision.log"
    done ;;
  tune-matrix)  # issue 8: a search from the default settings, then the benchmark matrix
    timeout 170 python -m workbench tune --budget-seconds 140 --json > "$OUT/tune.log" 2>&1
    keep; echo "tune rc=$rc"; tail -2 "$OUT/tune.log"
    timeout 380 python benchmarks/gpu_matrix.py --budget-seconds 330 --out "$OUT/gpu_matrix.json" 2>&1 | tail -25
    keep ;;
  overheads)  # issue 8's engine overhead, issue 7's sampling cost
    timeout 130 python benchmarks/engine_overhead.py --steps 200 --repeats 3 --budget-seconds 90 \
      --out "$OUT/engine_overhead.json" 2>&1 | tail -8; keep
    timeout 150 python benchmarks/profile_overhead.py --repeats 2 --out "$OUT/profile_overhead.json" 2>&1 | tail -8
    keep ;;
  ddp)  # issue 10's devices=1 ratio: short and long steps, and a DataLoader (each row ~2 min at 2 repeats)
    timeout 560 python benchmarks/distributed_overhead.py --steps 200 --repeats 2 \
      --out "$OUT/distributed_overhead.json" 2>&1 | tail -12; keep ;;
esac
exit "$rc"
