#!/usr/bin/env bash
# `ssm bench --backend cuda` in one device call (about 7 minutes): builds
# the program, the GPU op and model tests and cuda_bench; runs the norm,
# projection and decode-step op tests, the golden models and the bench's
# gpu test (tests/gpu/bench_cuda_test.cpp); makes the three 130m-shaped models
# (bench/configs, BF16 projections, random weights) and prints their
# `ssm bench --backend cuda` tables (bounds measured in the run); decode at
# batch 1 with the step's switches off one at a time (CUDA graphs,
# programmatic dependent launch, the fused decode kernels); cuda_bench
# --quick beside it for the same card; then the kernel times of 16 profiled
# Mamba-2 decode steps (Nsight Compute, summed by kernel; the bounds'
# products and the warm-up's first, unrecorded step are in it too).
#   scripts/cuda-bench-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/device.log"
gpu_build build "-DSSM_BUILD_TESTS=ON -DSSM_BUILD_BENCH=ON" ssm_cli test_ops_gpu test_model_gpu cuda_bench
ssm=$build/bin/ssm
tstatus=0
# The norms (now launched overlapped at few rows), the projections and the
# decode step against ref; the golden models (step == prefill among them).
timeout 200 "$build/tests/test_ops_gpu" \
  --gtest_filter='Backends/*RmsNorm*:Backends/*NormLinear*:Backends/*SsdStep*:Backends/*Linear*-*_Q8' \
  > "$logs/ops_test.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran" "$logs/ops_test.log" | head -30
timeout 300 "$build/tests/test_model_gpu" --gtest_filter='CudaBench.*:*GpuGolden*' > "$logs/model_test.log" 2>&1 ||
  tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/model_test.log" | head -30
bench_models "$ssm" || tstatus=1
# The reference's kernels round activations to bf16 for its bf16 products:
# as cuda_bench, one product per projection instead of three exact pieces.
export SSM_CUDA_ROUND_ACTIVATIONS=1
for m in mamba2 mamba3_siso mamba3_mimo4; do
  echo "== $m: prefill 2048 and decode 128 at batch 1 and 8; decode at batch 64"
  timeout 120 "$ssm" bench "$models/$m" --backend cuda -p 2048 -n 128 -b 1,8 -r 3 -t 1 \
    2>&1 | tee "$logs/bench_$m.md" || tstatus=1
  timeout 60 "$ssm" bench "$models/$m" --backend cuda -p 0 -n 128 -b 64 -r 3 -t 1 2>&1 | grep -E "^\| bf16"
done
echo "== mamba2 decode at batch 1 (-n 256, -r 5): default; SSM_CUDA_GRAPHS=0; SSM_CUDA_OVERLAP=0; SSM_CUDA_FUSED_DECODE=1"
for v in "" SSM_CUDA_GRAPHS=0 SSM_CUDA_OVERLAP=0 SSM_CUDA_FUSED_DECODE=1; do
  echo "-- ${v:-default}"
  env $v timeout 60 "$ssm" bench "$models/mamba2" --backend cuda -p 0 -n 256 -r 5 -t 1 2>&1 | grep -E "^\| bf16"
done
echo "== cuda_bench --quick (same card)"
timeout 120 "$build/bench/cuda_bench" --quick 2>&1 | tee "$logs/cuda_bench.log"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "== ncu: ssm bench mamba2 --backend cuda -p 0 -n 16 -r 1 (warm-up + 1 repetition: 32 steps)"
timeout 200 "$ncu" --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
  "$ssm" bench "$models/mamba2" --backend cuda -p 0 -n 16 -r 1 -t 1 > "$logs/decode_profile.csv" 2>&1
python3 "$src/scripts/ncu-kernel-times.py" "$logs/decode_profile.csv" 30 | tee "$logs/decode_profile.txt"
exit $tstatus
