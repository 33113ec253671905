// The Mamba-3 ops' sizes and inputs as launch_mamba3.h's plain views, for
// the forward launchers (mamba3_ops.cpp) and the backward ones
// (mamba3_attention_backward_ops.cpp) alike: one place reads the op
// arguments' shapes and pointers.
#pragma once

#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/views.h"
#include "ssm/ops/context.h"
#include "ssm/ops/mamba3.h"

namespace ssm::cuda {

inline const float* const_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

inline Mamba3PrepareInputs mamba3_prepare_inputs(const ops::Mamba3PrepareArgs& a) {
  Mamba3PrepareInputs l;
  l.B = a.x.dim(0);
  l.L = a.x.dim(1);
  l.H = a.heads;
  l.P = a.x.cols() / a.heads;
  l.G = a.groups;
  l.R = a.rank;
  l.N = a.B.cols() / (l.R * l.G);
  l.S = a.ang.cols();
  l.halves = a.pairs == ops::RotaryPairs::kHalves;
  l.A_floor = a.A_floor;
  l.norm_eps = a.norm_eps;
  l.x = const_rows_of(a.x);
  l.Bm = const_rows_of(a.B);
  l.C = const_rows_of(a.C);
  l.ddt = const_rows_of(a.ddt);
  l.ddA = const_rows_of(a.ddA);
  l.trap = const_rows_of(a.trap);
  l.ang = const_rows_of(a.ang);
  l.dt_bias = a.dt_bias.data<float>();
  l.B_norm = a.B_norm.data<float>();
  l.C_norm = a.C_norm.data<float>();
  l.mimo_x = const_or_null(a.mimo_x);
  return l;
}

// The whole launch of mamba3_prepare: inputs, outputs, and the phases (the
// op's tensor when it is kept, else scratch from ctx's arena: the caller
// holds an Arena::Scope open until the launch has been queued; the scratch
// is the same size on every decode step, so a recorded step finds the
// arena grown by the first).
// What the prepare op's kernels and the fused decode step (mamba3_step.cu)
// both take beyond the inputs: the biases, the entering phase, the per-step
// outputs they write.
inline void set_prepare_outputs(Mamba3PrepareLaunch& l, const ops::Mamba3PrepareArgs& a) {
  l.B_bias = a.B_bias.data<float>();
  l.C_bias = a.C_bias.data<float>();
  l.phase = ptr_or_null(a.phase);
  l.B_normed = ops::elements<float>(a.B_normed);
  l.C_normed = ops::elements<float>(a.C_normed);
  l.ang_rate = ptr_or_null(a.ang_rate);
  l.dt = ops::elements<float>(a.dt);
  l.A = ops::elements<float>(a.A);
  l.lam = ops::elements<float>(a.lam);
}

inline Mamba3PrepareLaunch mamba3_prepare_launch(Context& ctx, const ops::Mamba3PrepareArgs& a) {
  Mamba3PrepareLaunch l;
  static_cast<Mamba3PrepareInputs&>(l) = mamba3_prepare_inputs(a);
  set_prepare_outputs(l, a);
  l.q = ops::elements<float>(a.q);
  l.k = ops::elements<float>(a.k);
  l.v = ops::elements<float>(a.v);
  if (l.S > 0 && l.B * l.L > 0)
    l.phases = a.phases.defined() ? ops::elements<float>(a.phases)
                                  : ops::elements<float>(ctx.arena().alloc(DType::kF32, {l.B, l.H, l.L, l.S}));
  return l;
}

inline Mamba3ScanInputs mamba3_scan_inputs(const ops::Mamba3ScanArgs& a) {
  Mamba3ScanInputs l;
  l.B = a.q.dim(0);
  l.H = a.q.dim(1);
  l.L = a.q.dim(2);
  l.R = a.q.dim(3);
  l.N = a.q.dim(4);
  l.P = a.v.dim(4);
  l.q = a.q.data<float>();
  l.k = a.k.data<float>();
  l.v = a.v.data<float>();
  l.dt = a.dt.data<float>();
  l.A = a.A.data<float>();
  l.lam = a.lam.data<float>();
  l.D = const_or_null(a.D);
  return l;
}

inline Mamba3OutputInputs mamba3_output_inputs(const ops::Mamba3OutputArgs& a) {
  Mamba3OutputInputs l;
  l.B = a.o.dim(0);
  l.H = a.o.dim(1);
  l.L = a.o.dim(2);
  l.R = a.rank;
  l.P = a.o.dim(4);
  l.o = a.o.data<float>();
  l.z = const_rows_of(a.z);
  l.mimo_z = const_or_null(a.mimo_z);
  l.mimo_o = const_or_null(a.mimo_o);
  l.norm = const_or_null(a.norm);
  l.norm_eps = a.norm_eps;
  return l;
}

}  // namespace ssm::cuda
