#include "ssm/layers/mamba2_layer.h"

#include <algorithm>
#include <cmath>

#include "ssm/ops/activations.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/gemm.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/ssd_scan.h"
#include "ssm/ops/ssd_step.h"

namespace ssm {
namespace {

// Grows a workspace tensor to at least `rows` x `cols`; never shrinks.
float* scratch(Tensor& t, int64_t rows, int64_t cols) {
  if (!t.defined() || t.numel() < rows * cols) t = Tensor::empty(DType::kF32, {rows, cols});
  return t.data<float>();
}

const float* optional(const SequenceLayer& layer, const std::string& name, bool present) {
  return present ? layer.param(name).value.data<float>() : nullptr;
}

}  // namespace

Mamba2Layer::Mamba2Layer(const Mamba2Config& config) : cfg_(config) {
  const auto& c = cfg_;
  add_param("in_proj.weight", {c.d_in_proj(), c.d_model});
  if (c.proj_bias) add_param("in_proj.bias", {c.d_in_proj()}, ParamRole::kNoDecay);
  add_param("conv1d.weight", {c.conv_dim(), 1, c.d_conv});
  if (c.conv_bias) add_param("conv1d.bias", {c.conv_dim()}, ParamRole::kNoDecay);
  add_param("dt_bias", {c.nheads()}, ParamRole::kNoDecay);
  add_param("A_log", {c.nheads()}, ParamRole::kNoDecay);
  add_param("D", {c.nheads()}, ParamRole::kNoDecay);
  if (c.rmsnorm) add_param("norm.weight", {c.d_inner()}, ParamRole::kNoDecay);
  add_param("out_proj.weight", {c.d_model, c.d_inner()});
  if (c.proj_bias) add_param("out_proj.bias", {c.d_model}, ParamRole::kNoDecay);
}

std::unique_ptr<LayerState> Mamba2Layer::make_state(int64_t batch) const {
  auto s = std::make_unique<Mamba2State>();
  s->conv = Tensor::zeros(DType::kF32, {batch, cfg_.d_conv - 1, cfg_.conv_dim()});
  s->ssm = Tensor::zeros(DType::kF32, {batch, cfg_.nheads(), cfg_.headdim, cfg_.d_state});
  return s;
}

void Mamba2Layer::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx) {
  const auto& c = cfg_;
  const int64_t B = x.dim(0), L = x.dim(1), rows = B * L;
  const int64_t d_inner = c.d_inner(), conv_dim = c.conv_dim(), H = c.nheads();
  const int64_t width = c.d_in_proj();
  ThreadPool& pool = ctx.pool();

  std::unique_ptr<LayerState> fresh;
  if (!state) {
    fresh = make_state(B);
    state = fresh.get();
  }
  auto& st = static_cast<Mamba2State&>(*state);
  SSM_CHECK(st.ssm.dim(0) == B, "state holds ", st.ssm.dim(0), " sequences, input has ", B);

  // [z | xBC | dt] = u @ in_proj^T
  float* zxbcdt = scratch(zxbcdt_, rows, width);
  ops::linear(x.data<float>(), rows, c.d_model, param("in_proj.weight").value.data<float>(), width,
              optional(*this, "in_proj.bias", c.proj_bias), zxbcdt, pool);

  // xBC = SiLU(conv(xBC) + bias)
  float* xbc = scratch(xbc_, rows, conv_dim);
  ops::Conv1dArgs conv{.batch = B, .length = L, .channels = conv_dim, .kernel = c.d_conv,
                       .in = zxbcdt + d_inner, .ld_in = width,
                       .weight = param("conv1d.weight").value.data<float>(),
                       .bias = optional(*this, "conv1d.bias", c.conv_bias),
                       .state = st.conv.data<float>(), .out = xbc, .silu = true};
  ops::causal_conv1d(conv, pool);

  // dt = clamp(softplus(dt + dt_bias)), A = -exp(A_log)
  float* dt = scratch(dt_, rows, H);
  const float* dt_bias = param("dt_bias").value.data<float>();
  const float lo = static_cast<float>(c.dt_limit_lo), hi = static_cast<float>(c.dt_limit_hi);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h)
      dt[r * H + h] = std::clamp(ops::softplus(zxbcdt[r * width + d_inner + conv_dim + h] + dt_bias[h]), lo, hi);
  std::vector<float> A(H);
  const float* A_log = param("A_log").value.data<float>();
  for (int64_t h = 0; h < H; ++h) A[h] = -std::exp(A_log[h]);

  float* ys = scratch(ys_, rows, d_inner);
  ops::SsdScanArgs scan{.batch = B, .length = L, .heads = H, .headdim = c.headdim,
                        .d_state = c.d_state, .groups = c.ngroups, .chunk = c.chunk_size,
                        .x = xbc, .ld_x = conv_dim,
                        .B = xbc + d_inner, .C = xbc + d_inner + c.ngroups * c.d_state,
                        .ld_bc = conv_dim, .dt = dt, .ld_dt = H, .A = A.data(),
                        .D = param("D").value.data<float>(), .y = ys, .ld_y = d_inner,
                        .state = st.ssm.data<float>()};
  if (reference_scan_) ops::ssd_scan_reference(scan);
  else ops::ssd_scan_chunked(scan, pool);

  // y = GroupRMSNorm(y * SiLU(z)) * w   (or y * SiLU(z) without the norm)
  if (c.rmsnorm) {
    ops::gated_rms_norm(ys, zxbcdt, width, param("norm.weight").value.data<float>(), rows, d_inner,
                        d_inner / c.ngroups, c.norm_eps, c.norm_before_gate, ys, pool);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < d_inner; ++i) ys[r * d_inner + i] *= ops::silu(zxbcdt[r * width + i]);
  }
  ops::linear(ys, rows, d_inner, param("out_proj.weight").value.data<float>(), c.d_model,
              optional(*this, "out_proj.bias", c.proj_bias), y.data<float>(), pool);
}

void Mamba2Layer::step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx) {
  const auto& c = cfg_;
  const int64_t B = x.dim(0);
  const int64_t d_inner = c.d_inner(), conv_dim = c.conv_dim(), H = c.nheads();
  const int64_t width = c.d_in_proj();
  ThreadPool& pool = ctx.pool();
  auto& st = static_cast<Mamba2State&>(state);
  SSM_CHECK(st.ssm.dim(0) == B, "state holds ", st.ssm.dim(0), " sequences, input has ", B);

  // [z | xBC | dt] = u @ in_proj^T
  float* zxbcdt = scratch(zxbcdt_, B, width);
  ops::linear(x.data<float>(), B, c.d_model, param("in_proj.weight").value.data<float>(), width,
              optional(*this, "in_proj.bias", c.proj_bias), zxbcdt, pool);

  // xBC = SiLU(conv(xBC) + bias), the conv window advanced by one input
  float* xbc = scratch(xbc_, B, conv_dim);
  ops::causal_conv1d_step({.batch = B, .channels = conv_dim, .kernel = c.d_conv,
                           .in = zxbcdt + d_inner, .ld_in = width,
                           .weight = param("conv1d.weight").value.data<float>(),
                           .bias = optional(*this, "conv1d.bias", c.conv_bias),
                           .state = st.conv.data<float>(), .out = xbc, .silu = true},
                          pool);

  // dt = clamp(softplus(dt + dt_bias)), A = -exp(A_log)
  float* dt = scratch(dt_, B, H);
  float* A = scratch(A_, 1, H);
  const float* dt_bias = param("dt_bias").value.data<float>();
  const float* A_log = param("A_log").value.data<float>();
  const float lo = static_cast<float>(c.dt_limit_lo), hi = static_cast<float>(c.dt_limit_hi);
  for (int64_t h = 0; h < H; ++h) A[h] = -std::exp(A_log[h]);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      dt[b * H + h] = std::clamp(ops::softplus(zxbcdt[b * width + d_inner + conv_dim + h] + dt_bias[h]), lo, hi);

  // S = exp(dt A) S + dt x B^T,  y = S C + D x
  float* ys = scratch(ys_, B, d_inner);
  ops::ssd_step({.batch = B, .heads = H, .headdim = c.headdim, .d_state = c.d_state,
                 .groups = c.ngroups, .x = xbc, .ld_x = conv_dim, .B = xbc + d_inner,
                 .C = xbc + d_inner + c.ngroups * c.d_state, .ld_bc = conv_dim, .dt = dt,
                 .ld_dt = H, .A = A, .D = param("D").value.data<float>(), .y = ys,
                 .ld_y = d_inner, .state = st.ssm.data<float>()},
                pool);

  // y = GroupRMSNorm(y * SiLU(z)) * w   (or y * SiLU(z) without the norm)
  if (c.rmsnorm) {
    ops::gated_rms_norm(ys, zxbcdt, width, param("norm.weight").value.data<float>(), B, d_inner,
                        d_inner / c.ngroups, c.norm_eps, c.norm_before_gate, ys, pool);
  } else {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < d_inner; ++i) ys[b * d_inner + i] *= ops::silu(zxbcdt[b * width + i]);
  }
  ops::linear(ys, B, d_inner, param("out_proj.weight").value.data<float>(), c.d_model,
              optional(*this, "out_proj.bias", c.proj_bias), y.data<float>(), pool);
}

std::vector<TrainableSlice> Mamba2Layer::trainable_parameters() {
  if (!wsla_) return SequenceLayer::trainable_parameters();
  // WSLA trains the B and C rows of in_proj only (SPEC §6).
  const int64_t begin = 2 * cfg_.d_inner();
  return {{&param("in_proj.weight"), begin, begin + 2 * cfg_.ngroups * cfg_.d_state}};
}

}  // namespace ssm
