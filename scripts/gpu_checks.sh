#!/usr/bin/env bash
# The GPU checks, in three parts that each fit one 10-minute machine call (most valuable first):
#   scripts/gpu_checks.sh 1|2|3 [--dry-run]
#   1: the GPU tests, and the truth table with 3 interleaved repeats and its trimmed traces
#   2: GPM beside kernel-busy for a launch-, an input- and a compute-bound run; the one-process DDP step
#      against the plain one, and DDP's extra ops per step
#   3: the largest batch (bf16, fp32), a tune from the defaults, the engine's and the sampler's overheads
# A part has PART_BUDGET seconds (540: a call's 10 minutes less the machine's start and the transfers). Each
# step has its own limit (its `step NAME SECONDS` line); a step that does not fit in what is left of the
# part's budget is skipped, and every step that did not run is printed and listed in $OUT/not_run.txt.
# --dry-run prints the plan as if every step took its whole limit (nothing runs; no GPU needed).
# Logs and JSON go under $OUT (default ./gpu-results). Exits with the first failing step's status (0 when all
# passed; 2 for bad arguments). Needs torch with CUDA, torchvision, nvidia-ml-py and platformdirs importable
# (PYTHONPATH may point at unpacked wheels); tests/gui is left out (no PySide6 there, and no GUI test needs a GPU).
set -uo pipefail
PARTS=3
PART_BUDGET=540
USAGE="usage: $0 1|2|3 [--dry-run]   (1: GPU tests + truth table; 2: GPM + DDP; 3: max-batch + tune + overheads)"
case "$#/${1:-}/${2:-}" in 1/[123]/|2/[123]/--dry-run) ;; *) echo "$USAGE" >&2; exit 2 ;; esac
PART=$1
DRY_RUN=$([ "${2:-}" = "--dry-run" ] && echo 1 || echo 0)
OUT=$(realpath -m "${OUT:-gpu-results}")  # before the cd: a relative $OUT is the caller's
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
: > "$OUT/not_run.txt"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 WORKBENCH_HOME=${WORKBENCH_HOME:-/tmp/workbench-gpu-home}
if [ "$DRY_RUN" = 0 ]; then
  # No GPU: every gpu test would skip and the part would look passed.
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || exit 1
fi

rc=0
spent=0  # a dry run counts each step as its whole limit; a real one reads the clock ($SECONDS)
elapsed() { if [ "$DRY_RUN" = 1 ]; then echo "$spent"; else echo "$SECONDS"; fi; }

# step NAME SECONDS LOG COMMAND...: run COMMAND under a limit of SECONDS, if that fits in what is left of the
# part, its output to LOG (under $OUT) and its tail to the terminal.
step() {
  local name=$1 limit=$2 log=$3 left
  shift 3
  left=$((PART_BUDGET - $(elapsed)))
  if [ "$limit" -gt "$left" ]; then
    echo "not run: $name (needs up to ${limit} s, ${left} s of the part's ${PART_BUDGET} s left)" | tee -a "$OUT/not_run.txt"
    return
  fi
  echo "== $name (up to ${limit} s; ${left} s left)"
  if [ "$DRY_RUN" = 1 ]; then
    spent=$((spent + limit))
    return
  fi
  timeout "$limit" "$@" > "$OUT/$log" 2>&1
  local code=$?
  [ "$rc" -ne 0 ] || rc=$code
  tail -25 "$OUT/$log"
  echo "== $name rc=$code after $SECONDS s"
}

WB="python -m workbench run --dataset synthetic --max-steps 400 --log-every 10 --profile --profile-every 150
    --no-evaluate --json --no-history"
case "$PART" in
  1)
    step "GPU tests" 280 "pytest_gpu.log" \
      python -m pytest -q -rA -m gpu tests/engine tests/experiments tests/history -p no:cacheprovider
    step "truth table (3 interleaved repeats, trimmed traces)" 250 "gpu_time_truth.log" \
      python benchmarks/gpu_time_truth.py --steps 150 --repeats 3 --ceiling-budget 0 --budget-seconds 205 \
      --traces "$OUT/traces" --out "$OUT/gpu_time_truth.json"
    ;;
  2)
    # shellcheck disable=SC2086 # $WB is a command line on purpose
    step "GPM: launch-bound (small-cnn b32)" 60 "gpm_launch_bound.json" \
      $WB --model small-cnn --batch-size 32 --pipeline gpu-resident
    # shellcheck disable=SC2086
    step "GPM: input-bound (small-cnn b256, CPU augment, 2 workers)" 70 "gpm_input_bound.json" \
      $WB --model small-cnn --batch-size 256 --pipeline dataloader --augment cpu --num-workers 2
    # shellcheck disable=SC2086
    step "GPM: compute-bound (resnet18 b1024 bf16 channels_last)" 80 "gpm_compute_bound.json" \
      $WB --model resnet18 --batch-size 1024 --precision bf16 --channels-last --pipeline gpu-resident
    step "DDP step vs plain (one process, short steps)" 240 "distributed_overhead.log" \
      python benchmarks/distributed_overhead.py --only 1 --steps 200 --repeats 3 --out "$OUT/distributed_overhead.json"
    step "DDP's extra ops per step" 60 "ddp_ops.log" \
      python benchmarks/ddp_ops.py --out "$OUT/ddp_ops.json"
    ;;
  3)
    for precision in bf16 fp32; do
      step "max-batch $precision" 150 "max_batch_$precision.log" \
        python -m workbench max-batch --model resnet18 --precision "$precision" --pipeline gpu-resident \
        --augment gpu --batch-size 4096 --steps-per-trial 3 --json
    done
    step "tune from the defaults" 170 "tune.log" \
      python -m workbench tune --budget-seconds 140 --json
    step "engine overhead" 130 "engine_overhead.log" \
      python benchmarks/engine_overhead.py --steps 200 --repeats 3 --budget-seconds 90 --out "$OUT/engine_overhead.json"
    step "profile overhead" 150 "profile_overhead.log" \
      python benchmarks/profile_overhead.py --repeats 2 --out "$OUT/profile_overhead.json"
    ;;
esac

if [ -s "$OUT/not_run.txt" ]; then
  echo "part $PART of $PARTS: these did not run (also in $OUT/not_run.txt):"
  cat "$OUT/not_run.txt"
else
  echo "part $PART of $PARTS: every step ran"
fi
exit "$rc"
