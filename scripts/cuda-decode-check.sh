#!/usr/bin/env bash
# The fused decode step (SSM_CUDA_FUSED_DECODE) in one device call (about
# 6 minutes on an H100 with 16 cores): builds the program and the GPU op
# and model tests; runs the projection, norm, decode-step and Mamba-3 op
# tests against ref and the golden models (step == prefill, states moved
# between devices) with the fusion on and off; makes the three 130m-shaped
# models (bench/configs, BF16, random weights) and prints `ssm bench MODEL
# --backend cuda -p 0 -n 256 -b 1 -r 5 -t 1` for each with the fusion on
# and off, and batch 64 once; then the kernel times of a few profiled
# Mamba-2 decode steps, fused and not (Nsight Compute, summed by kernel:
# the warm-up's first, unrecorded steps and the bounds' products are in it).
#   scripts/cuda-decode-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
for fused in 1 0; do
  echo "== tests, SSM_CUDA_FUSED_DECODE=$fused"
  SSM_CUDA_FUSED_DECODE=$fused timeout 200 "$build/tests/test_ops_gpu" \
    --gtest_filter='Backends/*RmsNorm*:Backends/*NormLinear*:Backends/*SsdStep*:Backends/*Linear*:Backends/Mamba3*-*_Q8:*Backward*' \
    > "$logs/ops_test_$fused.log" 2>&1 || tstatus=1
  grep -E "^\[  FAILED|PASSED|tests ran" "$logs/ops_test_$fused.log" | head -20
  SSM_CUDA_FUSED_DECODE=$fused timeout 200 "$build/tests/test_model_gpu" --gtest_filter='*GpuGolden*' \
    > "$logs/model_test_$fused.log" 2>&1 || tstatus=1
  grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/model_test_$fused.log" | head -20
done
bench_models "$ssm" || tstatus=1
# As cuda_bench and the reference's kernels: one bf16 product per projection.
export SSM_CUDA_ROUND_ACTIVATIONS=1
for m in mamba2 mamba3_siso mamba3_mimo4; do
  for fused in 1 0; do
    echo "== $m decode at batch 1, SSM_CUDA_FUSED_DECODE=$fused"
    SSM_CUDA_FUSED_DECODE=$fused timeout 60 "$ssm" bench "$models/$m" --backend cuda -p 0 -n 256 -b 1 -r 5 -t 1 \
      2>&1 | tee "$logs/bench_${m}_$fused.md" | grep -E "^\| (bf16|dtype)|bound|error" || tstatus=1
  done
  echo "== $m decode at batch 64 (fused)"
  timeout 60 "$ssm" bench "$models/$m" --backend cuda -p 0 -n 128 -b 64 -r 3 -t 1 2>&1 | grep -E "^\| bf16"
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for fused in 1 0; do
  echo "== ncu: mamba2 decode -n 8 -r 1 (warm-up + 1 repetition: 16 steps), SSM_CUDA_FUSED_DECODE=$fused"
  SSM_CUDA_FUSED_DECODE=$fused timeout 150 "$ncu" --clock-control none --csv --page raw \
    --metrics gpu__time_duration.sum "$ssm" bench "$models/mamba2" --backend cuda -p 0 -n 8 -r 1 -t 1 \
    > "$logs/decode_profile_$fused.csv" 2>&1
  python3 "$src/scripts/ncu-kernel-times.py" "$logs/decode_profile_$fused.csv" 16 |
    tee "$logs/decode_profile_$fused.txt"
done
exit $tstatus
