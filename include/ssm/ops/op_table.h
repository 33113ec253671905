// The kernels of one backend: one entry per op, null where the backend does
// not have it (calling such an op is an ssm::Error naming the op and the
// backend, never a silent fallback). The public functions in the op headers
// check shapes, dtypes and devices once for every backend, open a workspace
// scope on the context's arena, then call the entry here.
#pragma once

#include "ssm/ops/activation.h"
#include "ssm/ops/adamw.h"
#include "ssm/ops/attention.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/cross_entropy.h"
#include "ssm/ops/dropout.h"
#include "ssm/ops/embedding.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/mamba2_decode.h"
#include "ssm/ops/mamba3.h"
#include "ssm/ops/moe.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/selective_scan.h"
#include "ssm/ops/ssd.h"

namespace ssm {

template <typename Args>
using Kernel = void (*)(Context& ctx, const Args& args);

struct OpTable {
  Kernel<ops::LinearArgs> linear = nullptr;
  Kernel<ops::LinearBackwardArgs> linear_backward = nullptr;
  // Optional: ops::norm_linear runs the norm, then linear, where it is null.
  Kernel<ops::NormLinearArgs> norm_linear = nullptr;
  Kernel<ops::Conv1dArgs> conv1d = nullptr;
  Kernel<ops::Conv1dBackwardArgs> conv1d_backward = nullptr;
  Kernel<ops::RmsNormArgs> rms_norm = nullptr;
  Kernel<ops::RmsNormBackwardArgs> rms_norm_backward = nullptr;
  Kernel<ops::GatedRmsNormArgs> gated_rms_norm = nullptr;
  Kernel<ops::GatedRmsNormBackwardArgs> gated_rms_norm_backward = nullptr;
  Kernel<ops::SsdPrepareArgs> ssd_prepare = nullptr;
  Kernel<ops::SsdPrepareBackwardArgs> ssd_prepare_backward = nullptr;
  Kernel<ops::SsdScanArgs> ssd_scan = nullptr;
  Kernel<ops::SsdScanBackwardArgs> ssd_scan_backward = nullptr;
  Kernel<ops::SsdStepArgs> ssd_step = nullptr;
  // The ssd_scan, ssd_step, mamba3_scan and mamba3_prepare_scan kernels take
  // a BF16 state at L = 1 themselves (read and rounded in place); elsewhere
  // the ops widen it into F32 workspace around the kernel (ops/state_dtype.h),
  // on the host only: a device backend takes a BF16 state where its kernels
  // take it at every L (bf16_state_scans), else refuses it by name.
  bool bf16_state_steps = false;
  bool bf16_state_scans = false;
  // Optional: false (or null) where the backend does not take the stack's
  // shapes; ops::mamba2_decode_stack then runs its layers' ops.
  bool (*mamba2_decode_stack)(Context& ctx, const ops::Mamba2DecodeStackArgs& args) = nullptr;
  Kernel<ops::SelectiveScanArgs> selective_scan = nullptr;
  Kernel<ops::SelectiveScanBackwardArgs> selective_scan_backward = nullptr;
  Kernel<ops::MoeRouteArgs> moe_route = nullptr;
  Kernel<ops::RoutedExpertsArgs> routed_experts = nullptr;
  Kernel<ops::MoeRouteBackwardArgs> moe_route_backward = nullptr;
  Kernel<ops::RoutedExpertsBackwardArgs> routed_experts_backward = nullptr;
  Kernel<ops::Mamba3PrepareArgs> mamba3_prepare = nullptr;
  Kernel<ops::Mamba3PrepareBackwardArgs> mamba3_prepare_backward = nullptr;
  Kernel<ops::Mamba3ScanArgs> mamba3_scan = nullptr;
  Kernel<ops::Mamba3ScanBackwardArgs> mamba3_scan_backward = nullptr;
  // Optional: ops::mamba3_prepare_scan runs the two ops where it is null.
  Kernel<ops::Mamba3PrepareScanArgs> mamba3_prepare_scan = nullptr;
  Kernel<ops::Mamba3OutputArgs> mamba3_output = nullptr;
  Kernel<ops::Mamba3OutputBackwardArgs> mamba3_output_backward = nullptr;
  Kernel<ops::AttentionArgs> attention_append_kv = nullptr;
  Kernel<ops::AttentionArgs> attention = nullptr;
  Kernel<ops::AttentionBackwardArgs> attention_backward = nullptr;
  Kernel<ops::RopeBackwardArgs> rope_backward = nullptr;
  Kernel<ops::EmbeddingArgs> embedding = nullptr;
  Kernel<ops::EmbeddingBackwardArgs> embedding_backward = nullptr;
  Kernel<ops::AdamWArgs> adamw = nullptr;
  // Optional (device backends): every slice of a model in one launch.
  Kernel<ops::AdamWSlicesArgs> adamw_slices = nullptr;
  // The backward is the forward's product over dy: backends may point both
  // slots at one kernel.
  Kernel<ops::DropoutArgs> dropout = nullptr;
  Kernel<ops::DropoutArgs> dropout_backward = nullptr;
  double (*head_cross_entropy)(Context& ctx, const ops::HeadLossArgs& args) = nullptr;
  void (*add)(Context& ctx, const Tensor& dst, const Tensor& src, float alpha) = nullptr;
  void (*copy)(Context& ctx, const Tensor& dst, const Tensor& src) = nullptr;
  void (*fill)(Context& ctx, const Tensor& dst, float value) = nullptr;
  void (*scale)(Context& ctx, const Tensor& t, float alpha) = nullptr;
  void (*relu_squared)(Context& ctx, const Tensor& t) = nullptr;
  void (*gelu_product)(Context& ctx, const Tensor& gate, const Tensor& t) = nullptr;
  void (*relu_squared_backward)(Context& ctx, const Tensor& x, const Tensor& d) = nullptr;
  void (*gelu_product_backward)(Context& ctx, const Tensor& gate, const Tensor& t,
                                const Tensor& dgate, const Tensor& d) = nullptr;
  double (*sum_squares)(Context& ctx, const Tensor& t) = nullptr;
  // Optional: ops::sum_squares_to stores sum_squares' result where it is null.
  void (*sum_squares_to)(Context& ctx, const Tensor& t, const Tensor& out) = nullptr;
};

}  // namespace ssm
