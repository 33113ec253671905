// The reference backend: plain scalar code, accumulating in double where sums are long, written to be read against SPEC, not to be fast. It is the oracle every other backend is tested against, so it has every op.
// Each family of ops lives in its own file and adds its kernels to the table.
#pragma once

#include "ssm/ops/op_table.h"

namespace ssm::ref {

void add_linear_kernels(OpTable& t);       // linear.cpp
void add_conv1d_kernels(OpTable& t);       // conv1d.cpp
void add_norm_kernels(OpTable& t);         // rms_norm.cpp
void add_ssd_kernels(OpTable& t);          // ssd.cpp
void add_selective_scan_kernels(OpTable& t);  // selective_scan.cpp
void add_mamba3_kernels(OpTable& t);       // mamba3_*.cpp
void add_attention_kernels(OpTable& t);    // attention.cpp
void add_embedding_kernels(OpTable& t);    // embedding.cpp
void add_elementwise_kernels(OpTable& t);  // elementwise.cpp
void add_activation_kernels(OpTable& t);   // activation.cpp
void add_moe_kernels(OpTable& t);          // moe.cpp
void add_loss_kernels(OpTable& t);         // cross_entropy.cpp
void add_optimizer_kernels(OpTable& t);    // adamw.cpp
void add_dropout_kernels(OpTable& t);      // dropout.cpp

}  // namespace ssm::ref
