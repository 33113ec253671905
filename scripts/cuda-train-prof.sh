#!/usr/bin/env bash
# Issue 19's GPU training check in one device call (under 9 minutes): builds
# the cuda backend, runs the gpu tests that touch training, times `ssm bench
# --train --bf16` at 8 x 2048 for the 130m Mamba-2 and Mamba-3 SISO, and
# sums the kernel times of one Mamba-3 SISO training step (Nsight Compute).
# Each stage runs under `timeout`, so a slow one cannot take the rest's time.
#   scripts/cuda-train-prof.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# e.g. in a device call:  scripts/cuda-train-prof.sh . /tmp/b $OUT
# Stage limits in seconds (530 in all at most): BUILD_S (300), TEST_S (100),
# BENCH_S (30 each), PROF_S (70; 0: no profile). TESTS: the ctest -R regex;
# BATCHES: the benched batches ("8"); CONFIGS: the benched configs (the
# 130m Mamba-2 of bench/train_configs, Mamba-3 SISO of bench/configs);
# PROF_BATCH: the profiled batch (8); GRAPH: the SSM_CUDA_TRAIN_GRAPH values
# each bench runs with ("0": the step op by op; "0 1" also as one recorded
# CUDA graph); STEPS: the timed steps of each bench (3).
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-check-common.sh"
t0=$SECONDS
stage() { echo "== $1 ($((SECONDS - t0)) s in)"; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/device.log"
stage build
export -f gpu_build
export src build logs
timeout -k 5 "${BUILD_S:-300}" bash -c 'gpu_build build "$0" test_ops_gpu test_model_gpu ssm_cli' \
  "-DSSM_BUILD_TESTS=ON -DSSM_BUILD_BENCH=OFF" || { echo "build failed or timed out"; exit 1; }
ssm=$build/bin/ssm

stage tests
status=0
timeout -k 5 "${TEST_S:-100}" ctest --test-dir "$build" -L gpu \
  -R "${TESTS:-Train|Grad|Bf16|Mamba3ScanBackward|SsdScan}" -j4 --output-on-failure \
  > "$logs/test.log" 2>&1 || status=1
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Exception|Timeout" "$logs/test.log" | head -60
tail -3 "$logs/test.log"

stage bench
: > "$logs/bench.log"
# CONFIGS: the benched configs, paths from the source directory.
for cfg in ${CONFIGS:-bench/train_configs/mamba2_130m.json bench/configs/mamba3_siso_130m.json}; do
  cfg=$src/$cfg
  dir=/tmp/prof-$(basename "$cfg" .json)
  "$ssm" init --config "$cfg" --out "$dir" --force >> "$logs/bench.log" 2>&1 || { echo "init $cfg failed"; status=1; continue; }
  for b in ${BATCHES:-8}; do
    for g in ${GRAPH:-0}; do
      echo "SSM_CUDA_TRAIN_GRAPH=$g" | tee -a "$logs/bench.log"
      SSM_CUDA_TRAIN_GRAPH=$g timeout -k 5 "${BENCH_S:-30}" "$ssm" bench "$dir" --train --bf16 \
        --backend cuda --batch "$b" -p 2048 --train-steps "${STEPS:-3}" 2>&1 | tee -a "$logs/bench.log"
    done
  done
done
[ "${PROF_S:-70}" = 0 ] && { stage finished; exit $status; }

stage profile
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -z "$ncu" ]; then
  echo "no ncu on this machine"
  status=1
else
  # The bench's warm-up step and one timed step; ncu-kernel-times.py keeps
  # the launches of the last optimiser step (from the AdamW launches).
  timeout -k 5 "${PROF_S:-70}" "$ncu" --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
    "$ssm" bench /tmp/prof-mamba3_siso_130m --train --bf16 --backend cuda --batch "${PROF_BATCH:-8}" \
    -p 2048 --train-steps 1 > "$logs/profile.csv" 2> "$logs/profile.err"
  echo "ncu exit $? (124: timed out)"
  python3 "$src/scripts/ncu-kernel-times.py" "$logs/profile.csv" 30 --last-step adamw |
    tee "$logs/profile.txt"
fi
stage finished
exit $status
