#!/usr/bin/env bash
# The Mamba-2 decode stack's kernel (mamba2_decode_stack.cu,
# SSM_CUDA_PERSISTENT_DECODE) in one device call: builds the program and
# the GPU tests; runs its op test against ref (a launch a phase, and one
# cooperative launch for the stack), the decode-step op tests it shares
# its arithmetic with, and the model tests (tests/gpu/decode_stack_cuda_test.cpp:
# both modes against the layers' own kernels, step == prefill, states
# continuing on the CPU; the golden models with the kernel on); then
# `ssm bench MODEL --backend cuda -p 0 -n 256 -b 1,8` for the 130m Mamba-2
# bench model (BF16) with the kernel off, on (=1) and a launch a phase (=2),
# and Nsight Compute's kernel times of a few steps with it on.
#   scripts/cuda-stack-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
echo "== op tests"
timeout 300 "$build/tests/test_ops_gpu" \
  --gtest_filter='Backends/Mamba2DecodeStack*:Backends/*SsdStep*:Backends/*NormLinear*' \
  > "$logs/ops_test.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/ops_test.log" | head -30
echo "== model tests (the kernel's modes set by the tests themselves)"
timeout 300 "$build/tests/test_model_gpu" --gtest_filter='*DecodeStack*' > "$logs/model_test.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran|Failure|Expected|Which is" "$logs/model_test.log" | head -40
for mode in 1 2; do
  echo "== golden models, SSM_CUDA_PERSISTENT_DECODE=$mode"
  SSM_CUDA_PERSISTENT_DECODE=$mode timeout 200 "$build/tests/test_model_gpu" --gtest_filter='Mamba2/GpuGolden*' \
    > "$logs/golden_$mode.log" 2>&1 || tstatus=1
  grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/golden_$mode.log" | head -20
done
bench_models "$ssm" || tstatus=1
export SSM_CUDA_ROUND_ACTIVATIONS=1  # as the earlier tables: one bf16 product a projection
for mode in 0 1 2; do
  echo "== mamba2 decode, SSM_CUDA_PERSISTENT_DECODE=$mode"
  SSM_CUDA_PERSISTENT_DECODE=$mode timeout 90 "$ssm" bench "$models/mamba2" --backend cuda -p 0 -n 256 -b 1,8 -r 3 -t 1 \
    2>&1 | tee "$logs/bench_mamba2_$mode.md" | grep -E "^\| (bf16|dtype)|bound|rror" || tstatus=1
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "== ncu: mamba2 decode -n 8 -r 1 (16 steps), SSM_CUDA_PERSISTENT_DECODE=1"
SSM_CUDA_PERSISTENT_DECODE=1 timeout 150 "$ncu" --clock-control none --csv --page raw \
  --metrics gpu__time_duration.sum "$ssm" bench "$models/mamba2" --backend cuda -p 0 -n 8 -r 1 -t 1 \
  > "$logs/decode_profile.csv" 2>&1
python3 "$src/scripts/ncu-kernel-times.py" "$logs/decode_profile.csv" 16 | tee "$logs/decode_profile.txt"
exit $tstatus
