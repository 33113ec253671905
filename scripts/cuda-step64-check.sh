#!/usr/bin/env bash
# The Mamba-2 decode step's looping state blocks (docs/CUDA.md "Batch-64
# decode: the state step's blocks loop over tiles, prefetching") in one
# device call: builds the program and the GPU tests; runs the op tests of
# the Mamba-2 step and the Mamba-3 scan with each many-sequence kernel
# (SSM_CUDA_STEP_TILES unset: looping, 3 blocks a multiprocessor; 2:
# looping, 2; 0: the previous kernels, a block a 64-row tile) and the model
# tests (golden, BF16 state); prints `ssm bench` of the 130m-shaped Mamba-2
# and Mamba-3 SISO (BF16 weights) at batch 1 and 64 with each state dtype,
# the three kernels alternated; then, time left, the kernel times of a few
# profiled batch-64 steps (ncu) for each kernel with the BF16 state.
#   scripts/cuda-step64-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
for mode in 3 2 0; do
  echo "== op tests, SSM_CUDA_STEP_TILES=$mode"
  SSM_CUDA_STEP_TILES=$mode timeout 180 "$build/tests/test_ops_gpu" \
    --gtest_filter='*SsdStep*:*Bf16State*:Backends/Mamba3Scan.*:Backends/Mamba2DecodeStackTest.*' \
    > "$logs/ops_test_$mode.log" 2>&1 || tstatus=1
  grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/ops_test_$mode.log" | head -20
done
echo "== model tests (golden, BF16 state)"
timeout 240 "$build/tests/test_model_gpu" --gtest_filter='*GpuGolden*:*Bf16*' \
  > "$logs/model_test.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/model_test.log" | head -30
models=/tmp/ssm-bench-models
for m in mamba2 mamba3_siso; do
  [ -d "$models/$m" ] || "$ssm" init --config "$src/bench/configs/${m}_130m.json" --out "$models/$m" \
    --dtype bf16 > /dev/null || tstatus=1
done
# As cuda_bench and the reference's kernels: one bf16 product per projection.
export SSM_CUDA_ROUND_ACTIVATIONS=1
for m in mamba2 mamba3_siso; do
  for sd in bf16 f32; do
    for mode in 0 3 2; do
      [ "$SECONDS" -lt 480 ] || { echo "== bench $m $sd $mode skipped (${SECONDS}s)"; continue; }
      echo "== $m: --state-dtype $sd, SSM_CUDA_STEP_TILES=$mode"
      SSM_CUDA_STEP_TILES=$mode timeout 60 "$ssm" bench "$models/$m" --backend cuda --dtype bf16 -p 0 -n 64 \
        -b 1,64 -r 2 --state-dtype "$sd" 2>&1 | tee "$logs/bench_${m}_${sd}_$mode.md" |
        grep -E "^\| (bf16|dtype)|error" || tstatus=1
    done
  done
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for m in mamba2 mamba3_siso; do
  for mode in 0 3 2; do
    # The call's limit is 10 minutes: the profiles only while time is left.
    [ "$SECONDS" -lt 500 ] || { echo "== ncu $m $mode skipped (${SECONDS}s)"; continue; }
    echo "== ncu: $m at batch 64, --state-dtype bf16, SSM_CUDA_STEP_TILES=$mode (8 steps)"
    SSM_CUDA_STEP_TILES=$mode timeout 45 "$ncu" --clock-control none --csv --page raw \
      --metrics gpu__time_duration.sum \
      "$ssm" bench "$models/$m" --backend cuda --dtype bf16 -p 0 -n 4 -b 64 -r 1 --state-dtype bf16 \
      > "$logs/profile_${m}_$mode.csv" 2>&1
    python3 "$src/scripts/ncu-kernel-times.py" "$logs/profile_${m}_$mode.csv" 6 | tee "$logs/profile_${m}_$mode.txt"
  done
done
exit $tstatus
