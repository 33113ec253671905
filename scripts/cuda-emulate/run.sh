#!/bin/bash
# Runs cuda kernels on the CPU, without a GPU: the .cu files of
# mamba3_prepare, of attention with a KV cache (attention.cu, its host side
# in hybrid_ops.cpp), of the Mamba-3, attention and HF hybrid (selective scan,
# MoE, relu^2, GELU product) backward ops, of dropout and of the fused Mamba-2 decode
# step (ssd_step: conv_ssd.cu, ssd_step_wide.cu, norms.cu) and of the decode stack
# (mamba2_decode_stack.cu: a launch a phase, or all phases on one block), AdamW
# per slice and fused (loss_optimizer.cu, optimizer_ops.cpp), of the few-row projection with
# its norm (norm_linear and linear's few rows: linear_skinny.cu, linear_one_row.cu), of conv1d, the norms and the chunked
# SSD and Mamba-3 scans (chunk_scan.cu, with emu_tf32_mma.h for its
# tensor-core products; mamba3_scan.cu, mamba3_scan_step.cu; the fused Mamba-3 decode step,
# mamba3_step.cu) and the SSD scan's backward
# (ssd_scan_backward.cu, ssd_scan_backward_tiles.cu, ssd_scan_backward_f16.cu
# with emu_f16_mma.h for its FP16 products) and the Mamba-3 scan's
# backward tiles (mamba3_scan_backward_tiles.cu), the norms' and conv1d's backward
# (norms_backward.cu, mixer_backward.cu) and the head loss's softmax (loss_optimizer.cu)
# rewritten for emu.h, their host side
# (mamba3_attention_backward_ops.cpp, hybrid_backward_ops.cpp,
# ssd_step_ops.cpp, norm_linear_ops.cpp, mamba2_decode_ops.cpp, mixer_ops.cpp, mamba3_ops.cpp, ssd_scan_backward_ops.cpp, dropout_ops.cpp,
# norm_conv_backward_ops.cpp, train_ops.cpp's head loss (its products on the host), with the
# forward MoE kernels of hybrid_kernels.cu they reuse) and the op tests of tests/ops built
# with SSM_GPU_TESTS=1 against a "cuda" backend on the host (emu_backend.cpp):
# each op against ref as on the GPU. Slow (a fiber per CUDA thread); for
# checking a kernel's logic before spending device time on it.
#
#   scripts/cuda-emulate/run.sh [WORK_DIR] [gtest filter]
#   TRAIN=1 scripts/cuda-emulate/run.sh [WORK_DIR] [gtest filter]
#
# TRAIN=1 builds and runs, instead of the op tests, the HF families'
# training test of tests/gpu (hf_families_train_cuda_test.cpp: a few steps
# on "cuda" against the cpu backend), where every op without an emulated
# kernel is ref's: it checks that the emulated backward kernels train those
# models as the cpu backend does. TRAIN_TEST=NAME runs tests/gpu/NAME.cpp
# instead (e.g. train_cuda_test with the filter 'Cases/GpuGoldenGrad.*/0:Cases/GpuGoldenGrad.*/1':
# the golden gradients through the emulated backward kernels).
#
# Needs the default build's libraries (scripts/build.sh: build/; ssm_train
# and below for TRAIN=1) and the CUDA toolkit's headers
# (/usr/local/cuda/include), no GPU. The op tests take minutes (each fiber
# switch is a system call); long training curves (the 100-step tests)
# through the emulator would take hours, so it does not run them.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/ssm-cuda-emulate}
FILTER=${2:-'Backends/Mamba3Prepare.*:Backends/Mamba3Output.*:Backends/Mamba3ScanBackward.*:Backends/Mamba3PrepareBackward.*:Backends/AttentionForward.*:Backends/AttentionBackward.*:Backends/SelectiveScanBackwardTest.*:Backends/MoeBackwardTest.*:Backends/ActivationBackwardTest.*:Backends/SsdStepTest.*:Backends/NormLinearTest.*:Backends/Conv1dTest.*:Backends/RmsNormTest.*:Backends/SsdScanTest.*:Backends/Mamba3Scan.*:Backends/SsdScanBackwardTest.*:Backends/DropoutTest.*:Backends/HeadCrossEntropy.*:Backends/AdamW.*:Backends/Mamba2DecodeStackTest.*:Backends/Bf16StateTest.*:Backends/Mamba3PrepareScan.*-*BenchVocabulary*'}
HERE=$SRC/scripts/cuda-emulate
B=$SRC/build
mkdir -p "$WORK"
cd "$WORK"
CXX=${CXX:-g++}
FLAGS="-std=c++20 -O2 -g -pthread -I$SRC/src -I$SRC/include -I$SRC/tests -I$HERE -isystem /usr/local/cuda/include -DSSM_GPU_TESTS=1 -DSSM_GOLDEN_DIR=\"$SRC/tests/golden\""
kernels="mamba3_prepare mamba3_output_backward mamba3_scan_backward mamba3_prepare_backward attention attention_backward hybrid_backward hybrid_kernels
  conv_ssd ssd_step_wide norms chunk_scan mamba3_scan mamba3_scan_step ssd_scan_backward ssd_scan_backward_tiles ssd_scan_backward_f16 mamba3_scan_backward_tiles
  linear_skinny linear_one_row dropout norms_backward mixer_backward loss_optimizer mamba2_decode_stack mamba3_step"
# An object is rebuilt when it is older than its source or the emulator's
# headers (the engine's headers are not followed: a fresh WORK_DIR rebuilds
# everything).
stale() {
  local o=$1 f
  shift
  for f in "$@" "$HERE/emu.h" "$HERE/emu_tf32_mma.h" "$HERE/emu_f16_mma.h" "$HERE/transform.py"; do
    [ "$o" -nt "$f" ] || return 0
  done
  return 1
}
objs=""
for k in $kernels; do
  if stale "$k.o" "$SRC/src/ops/cuda/$k.cu"; then
    python3 "$HERE/transform.py" "$SRC/src/ops/cuda/$k.cu" "$k.cpp"
    $CXX $FLAGS -c "$k.cpp" -o "$k.o"
  fi
  objs="$objs $k.o"
done
for f in "$HERE/emu_backend.cpp" "$SRC/src/ops/cuda/mamba3_attention_backward_ops.cpp" \
  "$SRC/src/ops/cuda/hybrid_ops.cpp" \
  "$SRC/src/ops/cuda/hybrid_backward_ops.cpp" "$SRC/src/ops/cuda/ssd_step_ops.cpp" \
  "$SRC/src/ops/cuda/norm_linear_ops.cpp" \
  "$SRC/src/ops/cuda/mixer_ops.cpp" "$SRC/src/ops/cuda/mamba3_ops.cpp" \
  "$SRC/src/ops/cuda/ssd_scan_backward_ops.cpp" "$SRC/src/ops/cuda/dropout_ops.cpp" \
  "$SRC/src/ops/cuda/norm_conv_backward_ops.cpp" "$SRC/src/ops/cuda/train_ops.cpp" \
  "$SRC/src/ops/cuda/optimizer_ops.cpp" "$SRC/src/ops/cuda/mamba2_decode_ops.cpp"; do
  o=$(basename "$f" .cpp).o
  if stale "$o" "$f"; then $CXX $FLAGS -c "$f" -o "$o"; fi
  objs="$objs $o"
done
libs="$B/libssm_ops.a $B/libssm_tensor.a $B/libssm_core.a -lopenblas -lhwy -lgtest -lgtest_main"
if [ "${TRAIN:-0}" = 1 ]; then
  # The backend with ref's forward ops but mamba3_prepare (emu_backend.cpp).
  $CXX $FLAGS -DSSM_EMU_REF_FORWARD -c "$HERE/emu_backend.cpp" -o emu_backend_train.o
  objs=${objs/ emu_backend.o/ emu_backend_train.o}
  t=${TRAIN_TEST:-hf_families_train_cuda_test}
  $CXX $FLAGS -c "$SRC/tests/gpu/$t.cpp" -o "$t.o"
  $CXX -pthread -o emu_train_tests $objs "$t.o" $B/libssm_train.a \
    $B/libssm_dist.a $B/libssm_model.a $B/libssm_layers.a $B/libssm_io.a $libs -lzip -lz
  exec ./emu_train_tests --gtest_filter="${2:-*}"
fi
tests=""
for t in mamba3_scan_backward_test mamba3_output_test mamba3_prepare_test attention_test attention_backward_test \
  selective_scan_backward_test moe_backward_test activation_backward_test ssd_step_test conv1d_test \
  rms_norm_test ssd_scan_test mamba3_scan_test ssd_scan_backward_test norm_linear_test dropout_test \
  cross_entropy_test adamw_test mamba2_decode_test linear_test bf16_state_test mamba3_prepare_scan_test; do
  if stale "$t.o" "$SRC/tests/ops/$t.cpp"; then $CXX $FLAGS -c "$SRC/tests/ops/$t.cpp" -o "$t.o"; fi
  tests="$tests $t.o"
done
$CXX -pthread -o emu_op_tests $objs $tests $libs
./emu_op_tests --gtest_filter="$FILTER"
