#!/usr/bin/env bash
# The few-row projections in one wave (linear_skinny.cu's one_wave_kernel,
# SSM_CUDA_ONE_WAVE) and norm_linear's norm inside it (SSM_CUDA_FUSED_DECODE)
# in one device call: builds the program and the GPU tests; runs the op
# tests of the projections and of the decode step's other kernels against
# ref and the golden and decode model tests; then `ssm bench MODEL --backend
# cuda -p 0 -n 256 -b 1,8 -r 3` for the 130m Mamba-2 bench model (BF16) in
# three ways: the default (the multi-wave kernel: the one-wave kernel is
# opt-in since it measured slower), SSM_CUDA_ONE_WAVE=1 (its norms fused)
# and SSM_CUDA_ONE_WAVE=1 SSM_CUDA_FUSED_DECODE=0; and
# Nsight Compute's kernel times, grids and registers of a few default steps.
#   scripts/cuda-one-wave-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
for mode in default "SSM_CUDA_ONE_WAVE=1"; do
  echo "== op tests, $mode"
  # $mode is split into words on purpose: env assignments.
  # shellcheck disable=SC2086
  env ${mode/default/} timeout 300 "$build/tests/test_ops_gpu" \
    --gtest_filter='Backends/*NormLinear*:Backends/LinearTest.*:Backends/*SsdStep*:Backends/Mamba2DecodeStack*' \
    > "$logs/ops_test.log" 2>&1 || tstatus=1
  grep -E "^\[  FAILED|PASSED|tests ran|Failure" "$logs/ops_test.log" | head -30
done
echo "== model tests (golden models, decode)"
timeout 300 "$build/tests/test_model_gpu" --gtest_filter='*GpuGolden*:*Decode*' > "$logs/model_test.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran|Failure|Expected|Which is" "$logs/model_test.log" | head -40
bench_models "$ssm" || tstatus=1
export SSM_CUDA_ROUND_ACTIVATIONS=1  # as the earlier tables: one bf16 product a projection
for mode in default SSM_CUDA_ONE_WAVE=1 "SSM_CUDA_ONE_WAVE=1 SSM_CUDA_FUSED_DECODE=0"; do
  echo "== mamba2 decode, $mode"
  # shellcheck disable=SC2086
  env ${mode/default/} timeout 90 "$ssm" bench "$models/mamba2" --backend cuda -p 0 -n 256 -b 1,8 -r 3 -t 1 \
    2>&1 | tee "$logs/bench_mamba2_${mode// /_}.md" | grep -E "^\| (bf16|dtype)|bound|rror" || tstatus=1
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "== ncu: mamba2 decode -n 8 -r 1 (16 steps), default"
timeout 150 "$ncu" --clock-control none --csv --page raw \
  --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread \
  "$ssm" bench "$models/mamba2" --backend cuda -p 0 -n 8 -r 1 -t 1 > "$logs/decode_profile.csv" 2>&1
python3 "$src/scripts/ncu-kernel-times.py" "$logs/decode_profile.csv" 16 | tee "$logs/decode_profile.txt"
# Each kernel's grids and registers (the one-wave plans).
python3 - "$logs/decode_profile.csv" <<'PY'
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1], errors="replace") if l.startswith('"')))
h = rows[0]
n, g, r = h.index("Kernel Name"), h.index("launch__grid_size"), h.index("launch__registers_per_thread")
for k in sorted({(x[n].split("(")[0][:60], x[g], x[r]) for x in rows[1:] if len(x) > r and x[g].isdigit()}):
    print("grid %6s  registers %4s  %s" % (k[1], k[2], k[0]))
PY
exit $tstatus
