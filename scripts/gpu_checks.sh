#!/usr/bin/env bash
# The GPU checks, in four parts that each fit one 10-minute machine call (most valuable first):
#   scripts/gpu_checks.sh 1|2|3|4 [--dry-run]
#   1: the GPU tests, and GPM beside kernel-busy for a launch-bound run
#   2: the truth table with 3 interleaved repeats and its trimmed traces; GPM for an input- and a compute-bound
#      run; DDP's extra ops per step
#   3: the largest batch (bf16), the own-script traces (user-style loops, one per finding)
#   4: the one-process DDP step against the plain one, the engine's and the sampler's overheads
# A part has PART_BUDGET seconds (540: a call's 10 minutes less the machine's start and the transfers), and its
# steps' limits (each `step NAME SECONDS` line; about 1.5 times what the step took on an H100 where that is known)
# add up to no more than that, so every planned step starts. A step that still does not fit in what is left
# (a slow machine) is skipped; what a part leaves out by plan (`left_out NAME WHY`) is said with the command
# that runs it alone. Both are printed and listed in $OUT/not_run.txt.
# --dry-run prints the plan as if every step took its whole limit (nothing runs; no GPU needed).
# Logs and JSON go under $OUT (default ./gpu-results). Exits with the first failing step's status (0 when all
# passed; 2 for bad arguments). Needs torch with CUDA, torchvision, nvidia-ml-py and platformdirs importable
# (PYTHONPATH may point at unpacked wheels); tests/gui is left out (no PySide6 there, and no GUI test needs a GPU).
# pytest runs with this project's own configuration (pyproject.toml: warnings are errors); where pytest-timeout
# is missing, its `timeout` option would abort pytest with PytestConfigWarning, so that one warning is let
# pass (the step's own limit still ends a hang).
set -uo pipefail
PARTS=4
PART_BUDGET=540
USAGE="usage: $0 1|2|3|4 [--dry-run]   (1: GPU tests + GPM; 2: truth table + GPM + DDP ops; 3: max-batch + own-script traces; 4: DDP step + overheads)"
case "$#/${1:-}/${2:-}" in 1/[1234]/|2/[1234]/--dry-run) ;; *) echo "$USAGE" >&2; exit 2 ;; esac
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

# left_out NAME WHY: a step this part leaves out by plan, said and listed with what runs it alone.
left_out() {
  echo "left out: $1 ($2)" | tee -a "$OUT/not_run.txt"
}

# Without pytest-timeout, pyproject's `timeout` is an unknown option, a PytestConfigWarning, an error here.
PYTEST_TIMEOUT_OPTS=()
if [ "$DRY_RUN" = 0 ] && ! python -c "import pytest_timeout" 2>/dev/null; then
  echo "pytest-timeout is not installed: the tests run without their own timeouts (the step's limit holds)"
  PYTEST_TIMEOUT_OPTS=(-W "ignore::pytest.PytestConfigWarning")
fi

# pyproject's addopts run pytest in two processes (pytest-xdist's -n 2); the GPU tests run in one (-n 0): they
# measure the GPU's memory and time, which a second process on the one GPU would change.
if [ "$DRY_RUN" = 0 ] && ! python -c "import xdist" 2>/dev/null; then
  echo "pytest-xdist is not installed: pyproject's pytest options need it (pip install pytest-xdist, or the test extra)"
fi

WB="python -m workbench run --dataset synthetic --max-steps 400 --log-every 10 --profile --profile-every 150
    --no-evaluate --json --no-history"
case "$PART" in
  1)
    # About 270 s on an H100 before the telemetry, compile-mode and decode tests were added.
    step "GPU tests" 420 "pytest_gpu.log" \
      python -m pytest -q -rA -m gpu "${PYTEST_TIMEOUT_OPTS[@]}" tests/engine tests/experiments tests/history \
      -p no:cacheprovider -n 0
    # shellcheck disable=SC2086 # $WB is a command line on purpose
    step "GPM: launch-bound (small-cnn b32)" 60 "gpm_launch_bound.json" \
      $WB --model small-cnn --batch-size 32 --pipeline gpu-resident
    ;;
  2)
    step "truth table (3 interleaved repeats, trimmed traces)" 250 "gpu_time_truth.log" \
      python benchmarks/gpu_time_truth.py --steps 150 --repeats 3 --ceiling-budget 0 --budget-seconds 205 \
      --traces "$OUT/traces" --out "$OUT/gpu_time_truth.json"
    # shellcheck disable=SC2086
    step "GPM: input-bound (small-cnn b256, CPU augment, 2 workers)" 70 "gpm_input_bound.json" \
      $WB --model small-cnn --batch-size 256 --pipeline dataloader --augment cpu --num-workers 2
    # shellcheck disable=SC2086
    step "GPM: compute-bound (resnet18 b1024 bf16 channels_last)" 80 "gpm_compute_bound.json" \
      $WB --model resnet18 --batch-size 1024 --precision bf16 --channels-last --pipeline gpu-resident
    step "DDP's extra ops per step" 60 "ddp_ops.log" \
      python benchmarks/ddp_ops.py --out "$OUT/ddp_ops.json"
    ;;
  3)
    # A search took 3-4 min on an H100: one fits beside the own-script traces, a second does not.
    step "max-batch bf16" 300 "max_batch_bf16.log" \
      python -m workbench max-batch --model resnet18 --precision bf16 --pipeline gpu-resident \
      --augment gpu --batch-size 4096 --steps-per-trial 3 --json
    # Sixteen user-style loops, each profiled as docs/own-script.md says (about 195 s on an H100, a third of it
    # compiling a ResNet-50); read them anywhere with workbench trace (tests/trace_analysis/data/h100 holds a set).
    step "own-script traces" 240 "own_script_traces.log" \
      python scripts/make_own_script_gpu_traces.py "$OUT/own_script_traces"
    left_out "tune from the defaults" "ran on an H100 before (benchmarks/results/tune-h100.log): run it alone with \
python -m workbench tune --budget-seconds 140 --json"
    left_out "max-batch fp32" "another 3-4 min search: run it alone with python -m workbench max-batch --model \
resnet18 --precision fp32 --pipeline gpu-resident --augment gpu --batch-size 4096 --steps-per-trial 3 --json"
    ;;
  4)
    step "DDP step vs plain (one process, short steps)" 240 "distributed_overhead.log" \
      python benchmarks/distributed_overhead.py --only 1 --steps 200 --repeats 3 --out "$OUT/distributed_overhead.json"
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
