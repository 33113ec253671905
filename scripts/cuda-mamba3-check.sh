#!/usr/bin/env bash
# Mamba-3 on the GPU in one device call: builds the cuda backend, runs the
# `gpu` tests (every op test against ref, the golden models, gradients and
# training curves), then the Mamba-3 speeds: cuda_bench --quick (prefill and
# decode of the 130m-shaped Mamba-2, Mamba-3 SISO and MIMO R=4) and `ssm
# bench --train --bf16` of the 130m-shaped Mamba-3 SISO and MIMO at 8 x 2048
# and 1 x 2048.
#   scripts/cuda-mamba3-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh. TESTS: a ctest -R regex (all gpu
# tests when unset). BENCH=0: no speeds.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/device.log"
gpu_build build "-DSSM_BUILD_TESTS=ON -DSSM_BUILD_BENCH=ON" test_ops_gpu test_model_gpu cuda_bench ssm_cli
ctest --test-dir "$build" -L gpu ${TESTS:+-R "$TESTS"} -j4 --output-on-failure > "$logs/test.log" 2>&1
tstatus=$?
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Exception" "$logs/test.log" | head -60
tail -3 "$logs/test.log"
if [ "${BENCH:-1}" != 0 ]; then
  ssm=$build/ssm
  [ -x "$ssm" ] || ssm=$build/bin/ssm
  timeout 200 "$build/bench/cuda_bench" --quick 2>&1 | tee "$logs/bench.log"
  for cfg in mamba3_siso_130m mamba3_mimo4_130m; do
    dir=/tmp/bench-$cfg
    "$ssm" init --config "$src/bench/configs/$cfg.json" --out "$dir" --force > /dev/null 2>&1 ||
      { echo "init $cfg failed"; continue; }
    for b in 8 1; do
      echo "== $cfg --train --bf16 -b $b -p 2048"
      timeout 150 "$ssm" bench "$dir" --train --bf16 --backend cuda --batch "$b" -p 2048 \
        --train-steps 3 2>&1 | tee -a "$logs/train_bench.log"
    done
  done
fi
exit $tstatus
