#!/usr/bin/env bash
# Builds the cuda backend and runs its tests and benchmark on a machine with
# an NVIDIA GPU and the CUDA toolkit (nvcc, cuBLAS):
#   scripts/cuda-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# configures -DSSM_CUDA=ON for sm_90a (machine code plus PTX), builds with
# every core, runs `ctest -L gpu` and cuda_bench, and writes build.log,
# test.log and bench.log to LOG_DIR. DEPS_DIR, when set, holds Debian
# packages (.deb) of the libraries the machine lacks; they are unpacked
# there and found through pkg-config and CMAKE_PREFIX_PATH.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$logs/device.log"
gpu_build build "-DSSM_BUILD_BENCH=ON" ssm_ops test_ops_gpu test_model_gpu cuda_bench ssm_cli

ctest --test-dir "$build" -L gpu -j4 --output-on-failure > "$logs/test.log" 2>&1
tstatus=$?
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Exception" "$logs/test.log" | head -60
tail -5 "$logs/test.log"

# The program on the GPU: greedy generation from a golden Mamba-2 model gives
# the same ids on cuda as on cpu.
gen() { "$build/ssm" generate "$src/tests/golden/mamba2_hf_tiny" --prompt-ids 1,2,3,4 -n 24 --temp 0 \
          --print-ids -q --backend "$1"; }
{ gen cpu > "$logs/gen_cpu.txt" && gen cuda > "$logs/gen_cuda.txt" && cmp "$logs/gen_cpu.txt" "$logs/gen_cuda.txt" &&
  echo "cli: greedy generation on cuda equals cpu: $(cat "$logs/gen_cuda.txt")"; } > "$logs/cli.log" 2>&1 ||
  { echo "cli: generation check failed"; tstatus=1; }
"$build/ssm" generate "$src/tests/golden/mamba2_hf_tiny" --prompt-ids 1,2 -n 4 --backend cuda --session "$logs/s.state" \
  >> "$logs/cli.log" 2>&1; echo "cli: --session with cuda exits $? (2 expected)" >> "$logs/cli.log"
cat "$logs/cli.log"

timeout 240 "$build/bench/cuda_bench" ${BENCH_ARGS:-} 2>&1 | tee "$logs/bench.log"
if [ -n "${PROFILE:-}" ]; then  # kernel times of one prefill and three steps (Nsight Compute)
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 200 "$ncu" --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
    "$build/bench/cuda_bench" --profile > "$logs/profile.log" 2>&1
  grep -E "^  [a-zA-Z_]|gpu__time_duration" "$logs/profile.log" | head -60
fi
exit $tstatus
