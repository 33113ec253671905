#!/usr/bin/env bash
# The prefill kernels on the GPU in one device call (about 500 s): builds
# the cuda backend, runs every op test against ref (test_ops_gpu: conv1d,
# the norms, the 16-bit roundings under the linear tests, the chunked SSD
# and Mamba-3 scans among them) and the golden models on cuda (logits,
# steps == prefill, gradients, the HF families), then cuda_bench --quick and
# the kernel times of one profiled prefill of each model (Nsight Compute,
# summed by kernel).
#   scripts/cuda-prefill-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/device.log"
gpu_build build "-DSSM_BUILD_TESTS=ON -DSSM_BUILD_BENCH=ON" test_ops_gpu test_model_gpu cuda_bench
tstatus=0
timeout 150 "$build/tests/test_ops_gpu" --gtest_filter='Backends/*-*_Q8' > "$logs/ops.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran" "$logs/ops.log" | head -40
timeout 150 "$build/tests/test_model_gpu" --gtest_filter='*GpuGolden*:*GpuHfFamily.*' > "$logs/golden.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran" "$logs/golden.log" | head -20
timeout 120 "$build/bench/cuda_bench" --quick 2>&1 | tee "$logs/bench.log"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 150 "$ncu" --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
  "$build/bench/cuda_bench" --profile > "$logs/profile.csv" 2>&1
python3 "$src/scripts/ncu-kernel-times.py" "$logs/profile.csv" 30
exit $tstatus
