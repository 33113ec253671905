// RMSNorm over the last dimension (SPEC §1), and the gated, grouped norm of
// the Mamba-2 output (SPEC §3), which without weights is the plain gate
// y * SiLU(z) of MLPs and norm-free mixers.
//   rms_norm:        out = x / sqrt(mean(x^2) + eps) * w
//   gated_rms_norm:  norm_before_gate = false: out = GroupNorm(y * SiLU(z)) * w
//                    norm_before_gate = true:  out = GroupNorm(y) * w * SiLU(z)
//                    w undefined:              out = y * SiLU(z)
// GroupNorm normalises each run of `group` channels on its own.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct RmsNormArgs {
  Tensor x;    // (..., D) rows
  Tensor w;    // (D), or undefined: the weightless norm x / rms(x)
  float eps = 1e-5f;
  Tensor out;  // like x; may alias x
};
void rms_norm(Context& ctx, const RmsNormArgs& a);

struct RmsNormBackwardArgs {
  Tensor x, w;  // the forward's
  float eps = 1e-5f;
  Tensor dout;  // like x
  // dx = r w dout - x r^3 / D sum(x w dout), r = 1/rms: overwritten, or
  // added to when accumulate_dx (the residual stream). May not alias x or dout.
  Tensor dx;
  bool accumulate_dx = false;
  Tensor dw;  // (D) accumulated; undefined: not wanted
};
void rms_norm_backward(Context& ctx, const RmsNormBackwardArgs& a);

struct GatedRmsNormArgs {
  Tensor y;  // (..., D) rows
  Tensor z;  // (..., D) rows: the gate
  Tensor w;  // (D), or undefined for the plain gate
  int64_t group = 0;  // channels normalised together; 0: all D
  float eps = 1e-5f;
  bool norm_before_gate = false;
  Tensor out;  // like y; may alias y
};
void gated_rms_norm(Context& ctx, const GatedRmsNormArgs& a);

struct GatedRmsNormBackwardArgs {
  Tensor y, z, w;  // the forward's
  int64_t group = 0;
  float eps = 1e-5f;
  bool norm_before_gate = false;
  Tensor dout;  // like y
  Tensor dy;    // like y, overwritten
  Tensor dz;    // like z, overwritten
  Tensor dw;    // (D) accumulated; undefined: not wanted
};
void gated_rms_norm_backward(Context& ctx, const GatedRmsNormBackwardArgs& a);

}  // namespace ssm::ops
