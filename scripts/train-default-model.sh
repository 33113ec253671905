#!/usr/bin/env bash
# Trains the built-in default model: a small byte-level model on the King
# James Bible (public domain; Debian's bible-kjv-text), written to
# models/default/ as config.json + model.safetensors.
#
#   ARCH=mamba3 (default) or mamba2 (the fallback while Mamba-3 cannot train)
#   STEPS, BATCH, SEQ_LEN, LR: the schedule (defaults fit ~25 minutes on 2 cores)
#   ATTN_LAYERS: comma-separated layer indices that are attention instead
#            (a hybrid; default none), ATTN_HEADS their heads (default 6;
#            head_dim = D_MODEL / ATTN_HEADS, no position embedding)
#   DROPOUT: residual dropout probability, ssm train --dropout (GPU recipe
#            0.25, CPU recipe 0: none)
#   STORE_DTYPE: f32 (default) or bf16, the weights' dtype in models/default
#            (ssm convert --dtype)
#   WORK: scratch directory (data, checkpoints); rerunning resumes from its
#         checkpoint, so Ctrl-C and a second run continue the same run.
#   DRY_RUN=1: a few hundred steps of a smaller model, only to see the loss fall.
#   DATA: an existing copy of the text (where the bible program can't be
#         installed, e.g. a GPU machine without network)
#
#   --backend cuda: the GPU recipe (a larger model, several epochs, BF16
#   products; needs a build with -DSSM_CUDA=ON in BUILD_DIR). Without it, the
#   CPU recipe.
set -euo pipefail
cd "$(dirname "$0")/.."
BACKEND=cpu
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) BACKEND=${2:?--backend needs cpu or cuda}; shift 2 ;;
    --backend=*) BACKEND=${1#--backend=}; shift ;;
    *) echo "train-default-model.sh: unknown argument '$1' (only --backend cpu|cuda)" >&2; exit 2 ;;
  esac
done
case "$BACKEND" in cpu|cuda) ;; *) echo "train-default-model.sh: --backend must be cpu or cuda, not '$BACKEND'" >&2; exit 2 ;; esac
ARCH=${ARCH:-mamba3}
BUILD_DIR=${BUILD_DIR:-build}
WORK=${WORK:-/tmp/ssm-default-model-$ARCH}
THREADS=${THREADS:-2}
SEED=${SEED:-1}
if [ "${DRY_RUN:-0}" = 1 ]; then
  D_MODEL=${D_MODEL:-128} N_LAYER=${N_LAYER:-2} STEPS=${STEPS:-300} BATCH=${BATCH:-8} SEQ_LEN=${SEQ_LEN:-128}
elif [ "$BACKEND" = cuda ]; then
  # ~5.8M parameters (23.3 MB in F32), about 10 epochs of the
  # training text (240 steps of 32 x 512 bytes an epoch) under residual
  # dropout 0.25; without dropout the held-out score is best near 1000
  # steps and 2000 memorise (train 0.71 bits per byte, held-out 1.77).
  D_MODEL=${D_MODEL:-384} N_LAYER=${N_LAYER:-6} STEPS=${STEPS:-2500} BATCH=${BATCH:-32} SEQ_LEN=${SEQ_LEN:-512}
  DROPOUT=${DROPOUT:-0.25}
else
  D_MODEL=${D_MODEL:-256} N_LAYER=${N_LAYER:-4} STEPS=${STEPS:-1500} BATCH=${BATCH:-8} SEQ_LEN=${SEQ_LEN:-128}
fi
if [ "$BACKEND" = cuda ]; then
  LR=${LR:-2e-3}
  WARMUP=${WARMUP:-100}
  WEIGHT_DECAY=${WEIGHT_DECAY:-1.0}
  device_args=(--backend cuda --bf16)
else
  LR=${LR:-3e-3}
  WARMUP=${WARMUP:-50}
  WEIGHT_DECAY=${WEIGHT_DECAY:-0.1}
  device_args=(--threads "$THREADS")
fi
DROPOUT=${DROPOUT:-0}
# The weights' dtype in models/default: f32 (what training and the Python
# quickstart's fine-tuning load by default) or bf16 (half the file).
STORE_DTYPE=${STORE_DTYPE:-f32}
ssm="$BUILD_DIR/ssm"

# 1. The text: every verse of the KJV through the bible program, verse
#    numbers dropped, one verse per line under each chapter heading.
mkdir -p "$WORK"
data="$WORK/kjv.txt"
if [ -n "${DATA:-}" ]; then
  cp "$DATA" "$data"
elif [ ! -s "$data" ]; then
  if ! command -v bible >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bible-kjv bible-kjv-text
  fi
  bible -l 100000 Gen1:1-Rev22:21 | sed -e 's/^ *[0-9][0-9]* //' > "$data"
fi
echo "data: $data ($(wc -c < "$data") bytes)"

# 2. The program.
if [ "$BACKEND" = cuda ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSSM_CUDA=ON >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target ssm_cli
else
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j "$THREADS" --target ssm_cli
fi

# 3. A fresh model (byte-level: no tokenizer.json, vocabulary 256).
model="$WORK/model"
if [ "$ARCH" = mamba3 ]; then
  ssm_cfg='{"layer": "Mamba3", "d_state": 64, "headdim": 64, "expand": 2, "chunk_size": 64}'
else
  ssm_cfg='{"layer": "Mamba2", "d_state": 64, "headdim": 64, "expand": 2, "chunk_size": 128}'
fi
ATTN_LAYERS=${ATTN_LAYERS:-}
ATTN_HEADS=${ATTN_HEADS:-6}
attn_cfg='{}'
if [ -n "$ATTN_LAYERS" ]; then
  attn_cfg="{\"causal\": true, \"num_heads\": $ATTN_HEADS, \"head_dim\": $((D_MODEL / ATTN_HEADS)), \"rotary_emb_dim\": 0}"
fi
cat > "$WORK/config.json" <<JSON
{"d_model": $D_MODEL, "n_layer": $N_LAYER, "vocab_size": 256, "pad_vocab_size_multiple": 8,
 "d_intermediate": 0, "ssm_cfg": $ssm_cfg, "attn_layer_idx": [$ATTN_LAYERS], "attn_cfg": $attn_cfg,
 "rms_norm": true, "residual_in_fp32": true, "fused_add_norm": true, "tie_embeddings": true}
JSON
resume=()
if [ -f "$model/checkpoint.safetensors" ]; then
  resume=(--resume)
else
  "$ssm" init --config "$WORK/config.json" --out "$model" --seed "$SEED" --force
fi

# 4. Training, with a held-out 5% (the end of Revelation), checkpoints every
#    100 steps.
"$ssm" train "$model" --data "$data" --steps "$STEPS" --batch "$BATCH" --seq-len "$SEQ_LEN" \
  --lr "$LR" --warmup "$WARMUP" --weight-decay "$WEIGHT_DECAY" --clip 1.0 --seed "$SEED" --dropout "$DROPOUT" \
  --checkpoint-every 100 --eval-every 200 --eval-tokens 65536 --log-every 25 \
  "${device_args[@]}" --in-place "${resume[@]}"

# 5. Held-out score and a sample.
"$ssm" score "$model" --data "$data" --seq-len "$SEQ_LEN" --threads "$THREADS" | tee "$WORK/score.txt"
if [ "${DRY_RUN:-0}" != 1 ]; then
  "$ssm" convert --dtype "$STORE_DTYPE" --force "$model" models/default
  echo "wrote models/default ($(du -h models/default/model.safetensors | cut -f1))"
fi
