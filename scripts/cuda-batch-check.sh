#!/usr/bin/env bash
# Batch-64 decode (docs/CUDA.md "Batch-64 decode") in one device call: builds
# the program and the GPU tests; runs the decode-step, Mamba-3 scan, golden
# and decode tests (ctest -L gpu -R 'SsdStep|Mamba3Scan|GpuGolden|Decode');
# makes the three 130m-shaped models (bench/configs, BF16, random weights)
# and prints `ssm bench MODEL --backend cuda -p 0 -n 128 -b 1,64 -r 2` for
# each; then the kernel times of a few profiled Mamba-2 and Mamba-3 SISO
# decode steps at batch 64 (Nsight Compute, summed by kernel).
#   scripts/cuda-batch-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
echo "== ctest -L gpu -R 'SsdStep|Mamba3Scan|GpuGolden|Decode'"
timeout 300 ctest --test-dir "$build" -L gpu -R 'SsdStep|Mamba3Scan|GpuGolden|Decode' -j4 --output-on-failure \
  > "$logs/test.log" 2>&1 || tstatus=1
grep -E "tests passed|tests failed|\*\*\*Failed|Failure" "$logs/test.log" | head -30
bench_models "$ssm" || tstatus=1
# As cuda_bench and the reference's kernels: one bf16 product per projection.
export SSM_CUDA_ROUND_ACTIVATIONS=1
for m in mamba2 mamba3_siso mamba3_mimo4; do
  echo "== $m decode at batch 1 and 64"
  timeout 90 "$ssm" bench "$models/$m" --backend cuda -p 0 -n 128 -b 1,64 -r 2 2>&1 |
    tee "$logs/bench_$m.md" | grep -E "^\| (bf16|dtype)|error" || tstatus=1
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for m in mamba2 mamba3_siso; do
  echo "== ncu: $m decode at batch 64, -n 4 -r 1 (warm-up + 1 repetition: 8 steps)"
  timeout 150 "$ncu" --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
    "$ssm" bench "$models/$m" --backend cuda -p 0 -n 4 -b 64 -r 1 > "$logs/profile_$m.csv" 2>&1
  python3 "$src/scripts/ncu-kernel-times.py" "$logs/profile_$m.csv" 12 | tee "$logs/profile_$m.txt"
done
exit $tstatus
