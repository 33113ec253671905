// The cuda backend's kernels by family, each file adding its entries to the
// table. Entries left null (the backward ops, which come with training on
// the GPU, and the ops not yet written here) fail with the op-named error.
#pragma once

#include "ssm/ops/op_table.h"

namespace ssm::cuda {

void add_linear_kernels(OpTable& t);       // linear.cpp
void add_norm_linear_kernels(OpTable& t);  // norm_linear_ops.cpp: a decode step's norm and projection
// norm_linear_ops.cpp: linear of few rows (M <= 8, F32/BF16/F16 weights) by
// the few-row kernel; false (nothing done) for the rest.
bool linear_few_rows(Context& ctx, const ops::LinearArgs& a);
void add_elementwise_kernels(OpTable& t);  // elementwise.cpp
void add_mixer_kernels(OpTable& t);        // mixer_ops.cpp: norms, embedding, conv1d, ssd
void add_ssd_step_kernels(OpTable& t);     // ssd_step_ops.cpp: the fused Mamba-2 decode step
// mamba2_decode_ops.cpp: a decode step through a stack of Mamba-2 layers
void add_mamba2_decode_kernels(OpTable& t);
void add_mamba3_kernels(OpTable& t);       // mamba3_ops.cpp: prepare, scan, output (forward)
void add_hybrid_kernels(OpTable& t);       // hybrid_ops.cpp: relu^2, selective scan, MoE, attention
void add_train_kernels(OpTable& t);        // train_ops.cpp: backward ops, head loss, AdamW
void add_optimizer_kernels(OpTable& t);    // optimizer_ops.cpp: AdamW (called by add_train_kernels)
void add_dropout_kernels(OpTable& t);      // dropout_ops.cpp: training's residual dropout
// norm_conv_backward_ops.cpp (called by add_train_kernels): the norms',
// conv1d's and ssd_prepare's backward
void add_norm_conv_backward_kernels(OpTable& t);
// ssd_scan_backward_ops.cpp (called by add_train_kernels)
void add_ssd_scan_backward_kernels(OpTable& t);
// mamba3_attention_backward_ops.cpp (called by add_train_kernels)
void add_mamba3_attention_backward_kernels(OpTable& t);
// hybrid_backward_ops.cpp (called by add_train_kernels): relu^2, GELU product,
// selective scan, MoE backward
void add_hybrid_backward_kernels(OpTable& t);

}  // namespace ssm::cuda
