#!/usr/bin/env bash
# Builds multi-GPU training (-DSSM_CUDA=ON -DSSM_NCCL=ON) and runs its checks
# on a machine with an NVIDIA GPU:
#   scripts/nccl-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# BUILD_DIR may be the one scripts/cuda-check.sh just used (it is
# reconfigured with NCCL added, so only the new pieces build). Runs the
# one-GPU NCCL tests (ctest -R NcclTrain, label gpu), the multi-process
# launcher/rendezvous/sharding tests (test_dist, CPU ranks), and shows
# `ssm train --backend cuda --gpus 1` next to the plain run (BENCH=1: also
# at the 130m shape, 8 x 2048). NCCL comes from
# PyTorch's wheel (python3 -c "import nvidia.nccl") or the CUDA toolkit.
# DEPS_DIR as for cuda-check.sh. NVLink multicast stays off.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
source "$(dirname "$0")/gpu-check-common.sh"

gpu_build nccl-build "-DSSM_NCCL=ON -DSSM_BUILD_TESTS=ON" ssm_cli test_model_gpu test_dist

ctest --test-dir "$build" -R 'NcclTrain|LaunchEnv|Group\.|LocalLaunch|TrainRanks' --output-on-failure \
  > "$logs/nccl-test.log" 2>&1
tstatus=$?
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Exception" "$logs/nccl-test.log" | head -40
"$build/tests/test_model_gpu" --gtest_filter='NcclTrain.*' 2>&1 | grep -E "^NCCL|^step|OK|FAILED" | head -40

# The program: one GPU rank through NCCL next to the plain GPU run.
tmp=$(mktemp -d)
cat > "$tmp/config.json" <<'JSON'
{"d_model": 256, "n_layer": 4, "vocab_size": 256, "pad_vocab_size_multiple": 8, "d_intermediate": 0,
 "attn_layer_idx": [], "attn_cfg": {}, "tie_embeddings": true,
 "ssm_cfg": {"layer": "Mamba2", "d_state": 64, "headdim": 64, "chunk_size": 64}}
JSON
"$build/ssm" init --config "$tmp/config.json" --out "$tmp/base" > /dev/null
cat "$src/README.md" > "$tmp/data.txt"
for i in 1 2 3 4 5 6 7 8; do cat "$src/docs/"*.md >> "$tmp/data.txt"; done
run() { "$build/ssm" train "$tmp/base" --data "$tmp/data.txt" --out "$tmp/$1" --steps 8 --batch 4 --seq-len 256 \
          --log-every 1 --warmup 2 --backend cuda "${@:2}"; }
{ echo "== plain"; run plain; echo "== --gpus 1"; run ranked --gpus 1; echo "== --gpus 1 --reduce-dtype bf16";
  run ranked16 --gpus 1 --reduce-dtype bf16; } > "$logs/nccl-cli.log" 2>&1
grep -E "^==|^step|reduced over|error" "$logs/nccl-cli.log"

# BENCH=1: the 130m-shaped Mamba-2 at 8 x 2048 (--bf16), plain against one
# NCCL rank (F32 and BF16 buckets): what the NCCL path costs on one GPU.
if [ -n "${BENCH:-}" ]; then
  "$build/ssm" init --config "$src/bench/train_configs/mamba2_130m.json" --out "$tmp/m130" > /dev/null
  big() { "$build/ssm" train "$tmp/m130" --data "$tmp/data.txt" --out "$tmp/$1" --steps 6 --batch 8 --seq-len 2048 \
            --log-every 1 --warmup 2 --holdout 0 --backend cuda --bf16 "${@:2}"; }
  { echo "== 130m plain"; big p; echo "== 130m --gpus 1"; big r --gpus 1;
    echo "== 130m --gpus 1 --reduce-dtype bf16"; big r16 --gpus 1 --reduce-dtype bf16; } > "$logs/nccl-bench.log" 2>&1
  grep -E "^==|^step [56]/|reduced over|error" "$logs/nccl-bench.log"
fi
rm -rf "$tmp"
exit $tstatus
