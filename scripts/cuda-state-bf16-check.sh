#!/usr/bin/env bash
# The BF16 recurrent state on the cuda backend (docs/CUDA.md "The BF16
# state on the GPU") in one device call: builds the program and the GPU
# tests; runs the op tests of the kernels that take the state (the decode
# step, the SSD and Mamba-3 scans, the BF16-state tests: each against its
# F32-state definition to the bit and near ref) and the model tests (a BF16
# state decoded on cuda against cpu, moved GPU -> CPU -> GPU and through a
# state file, prefill; and the golden F32 ones, which the change touches);
# makes the 130m-shaped Mamba-2 and Mamba-3 SISO models (bench/configs,
# BF16, random weights) and prints `ssm bench MODEL --backend cuda --dtype
# bf16 -p 0 -n 128 -b 1,8,64 -r 2` with --state-dtype f32 and bf16; then,
# time left, the kernel times of a few profiled batch-64 decode steps with
# each state dtype (Nsight Compute, summed by kernel).
#   scripts/cuda-state-bf16-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
echo "== op tests (state-taking kernels)"
timeout 240 "$build/tests/test_ops_gpu" \
  --gtest_filter='Backends/Bf16StateTest.*:Backends/SsdStepTest.*:Backends/SsdScanTest.*:Backends/Mamba3Scan.*:Backends/Mamba3PrepareScan*:Backends/Mamba2DecodeStackTest.*-*_Q8' \
  > "$logs/ops_test.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/ops_test.log" | head -30
echo "== model tests (BF16 state on cuda; golden)"
timeout 240 "$build/tests/test_model_gpu" --gtest_filter='Cases/GpuBf16State.*:*/GpuGolden.*' \
  > "$logs/model_test.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran|Failure|gpu bf16 state" "$logs/model_test.log" | head -40
models=/tmp/ssm-bench-models
for m in mamba2 mamba3_siso; do
  [ -d "$models/$m" ] || "$ssm" init --config "$src/bench/configs/${m}_130m.json" --out "$models/$m" \
    --dtype bf16 > /dev/null || tstatus=1
done
# As cuda_bench and the reference's kernels: one bf16 product per projection.
export SSM_CUDA_ROUND_ACTIVATIONS=1
for m in mamba2 mamba3_siso; do
  for sd in f32 bf16; do
    echo "== $m decode, --state-dtype $sd"
    timeout 90 "$ssm" bench "$models/$m" --backend cuda --dtype bf16 -p 0 -n 128 -b 1,8,64 -r 2 --state-dtype "$sd" \
      2>&1 | tee "$logs/bench_${m}_$sd.md" | grep -E "^\| (bf16|dtype)|bound|error" || tstatus=1
  done
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for m in mamba2 mamba3_siso; do
  for sd in f32 bf16; do
    # The call's limit is 9 minutes: the profiles only while time is left.
    [ "$SECONDS" -lt 420 ] || { echo "== ncu $m $sd skipped (${SECONDS}s)"; continue; }
    echo "== ncu: $m decode at batch 64, --state-dtype $sd, -n 4 -r 1 (warm-up + 1 repetition: 8 steps)"
    timeout 60 "$ncu" --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
      "$ssm" bench "$models/$m" --backend cuda --dtype bf16 -p 0 -n 4 -b 64 -r 1 --state-dtype "$sd" \
      > "$logs/profile_${m}_$sd.csv" 2>&1
    python3 "$src/scripts/ncu-kernel-times.py" "$logs/profile_${m}_$sd.csv" 8 | tee "$logs/profile_${m}_$sd.txt"
  done
done
exit $tstatus
