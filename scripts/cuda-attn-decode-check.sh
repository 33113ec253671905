#!/usr/bin/env bash
# The split decode attention (attention.cu's decode_split_kernel and
# decode_combine_kernel) in one device call: builds the program and the GPU
# tests; runs the attention and Mamba-3 prepare op tests against ref and the
# golden and hybrid model tests on cuda; then the hybrid
# mamba2_attn6_130m (bench/configs, BF16, random weights) decoding 128
# tokens at batch 1 and 8 after 0 and 8,192 cached tokens, and at batch 1
# after 40,000 (a cache past the 32,768 rows a recorded step was limited to
# before). With BASE=REV (a commit of this repository) the same benches run
# first on that commit, built in a worktree beside this one: before and after
# on the same card.
#   [BASE=REV] scripts/cuda-attn-decode-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh.
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
gpu_check_start
tstatus=0
timeout 300 "$build/tests/test_ops_gpu" --gtest_filter='*Attention*:*Mamba3Prepare*' \
  > "$logs/ops.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran" "$logs/ops.log" | head -20
timeout 300 "$build/tests/test_model_gpu" --gtest_filter='*GpuGolden*:*Hybrid*' \
  > "$logs/model.log" 2>&1 || tstatus=1
grep -E "^\[  FAILED|PASSED|tests ran" "$logs/model.log" | head -20
# As cuda_bench and the reference's kernels: one bf16 product per projection.
export SSM_CUDA_ROUND_ACTIVATIONS=1
model=/tmp/ssm-bench-models/mamba2_attn6
[ -d "$model" ] || "$ssm" init --config "$src/bench/configs/mamba2_attn6_130m.json" --out "$model" \
  --dtype bf16 > /dev/null || { echo "init failed"; exit 1; }
# decode_benches NAME SSM: the three decode benches, their rows printed.
decode_benches() {
  local name=$1 bin=$2 p
  for p in 0 8192; do
    echo "== $name: -p $p -n 128 -b 1,8"
    timeout 200 "$bin" bench "$model" --backend cuda --dtype bf16 -p "$p" -n 128 -b 1,8 -r 2 2>&1 |
      tee "$logs/bench_${name}_$p.md" | grep -E "^\| (bf16|dtype)|error" || tstatus=1
  done
  echo "== $name: -p 40000 -n 128 -b 1"
  timeout 200 "$bin" bench "$model" --backend cuda --dtype bf16 -p 40000 -n 128 -b 1 -r 2 2>&1 |
    tee "$logs/bench_${name}_40000.md" | grep -E "^\| (bf16|dtype)|error" || tstatus=1
}
if [ -n "${BASE:-}" ]; then
  base_src=$src-base
  git -C "$src" worktree add --force --detach "$base_src" "$BASE" > /dev/null 2>&1 ||
    { echo "no worktree at $BASE"; exit 1; }
  base_build=$build-base
  (src=$base_src build=$base_build && gpu_build base "" ssm_cli) || exit 1
  decode_benches base "$base_build/bin/ssm"
fi
decode_benches this "$ssm"
exit $tstatus
