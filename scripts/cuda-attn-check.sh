#!/usr/bin/env bash
# The flash attention kernels (attention.cu, attention_backward.cu) in one
# device call: builds the cuda backend, runs the attention op tests against
# ref (both product modes) and the golden models on cuda (the hybrids'
# logits and gradients among them), then for the two 130m-shaped hybrids a
# --bf16 training step at 8 x 2048 and prefill at 2048 tokens, batch 1 and 8.
#   scripts/cuda-attn-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
timeout 200 "$build/tests/test_ops_gpu" --gtest_filter='*Attention*' > "$logs/ops.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran" "$logs/ops.log" | head -20
timeout 200 "$build/tests/test_model_gpu" --gtest_filter='*GpuGolden*' > "$logs/golden.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran" "$logs/golden.log" | head -20
for m in mamba2_attn6_130m granite_hybrid_130m; do
  dir=/tmp/attn-check-$m
  "$ssm" init --config "$src/bench/configs/$m.json" --out "$dir" --force > /dev/null 2>&1 ||
    { echo "init $m failed"; tstatus=1; continue; }
  timeout 200 "$ssm" bench "$dir" --train --bf16 --backend cuda --batch 8 -p 2048 --train-steps 3 2>&1 |
    tee -a "$logs/bench.log"
  timeout 200 "$ssm" bench "$dir" --backend cuda -p 2048 -n 0 -b 1,8 -r 2 2>&1 | tee -a "$logs/bench.log"
done
exit $tstatus
