// Backward of the Mamba-2 mixer (SPEC §3): the forward is recomputed from
// the layer input u, keeping what the backward reads (projections, conv
// pre-activations, dt, scan output), then each step is reversed:
//   out_proj -> gated norm -> SSD scan -> dt / A -> conv + SiLU -> in_proj.
#include <algorithm>
#include <cmath>

#include "ssm/layers/mamba2_layer.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/gemm.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/ssd_scan.h"
#include "ssm/train/layer_backward.h"
#include "ssm/train/ops/activations_backward.h"
#include "ssm/train/ops/conv1d_backward.h"
#include "ssm/train/ops/linear_backward.h"
#include "ssm/train/ops/rms_norm_backward.h"
#include "ssm/train/ops/ssd_scan_backward.h"

namespace ssm {
namespace {

Tensor buffer(int64_t rows, int64_t cols) { return Tensor::empty(DType::kF32, {rows, cols}); }

const float* value_or_null(const SequenceLayer& layer, const std::string& name, bool present) {
  return present ? layer.param(name).value.data<float>() : nullptr;
}

}  // namespace

void backward_mamba2(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                     std::vector<Tensor>& grads, Context& ctx) {
  auto* m2 = dynamic_cast<Mamba2Layer*>(&layer);
  SSM_CHECK(m2, "backward_mamba2 called on a ", layer.kind(), " layer");
  const Mamba2Config& c = m2->config();
  ThreadPool& pool = ctx.pool();
  const int64_t B = x.dim(0), L = x.dim(1), rows = B * L, D = c.d_model;
  const int64_t d_inner = c.d_inner(), conv_dim = c.conv_dim(), H = c.nheads();
  const int64_t GN = c.ngroups * c.d_state, width = c.d_in_proj();
  const float* u = x.data<float>();
  auto grad = [&](const char* name) { return detail::grad_of(layer, grads, name); };

  // ---- forward recomputation ----
  Tensor zxbcdt_t = buffer(rows, width);
  float* zxbcdt = zxbcdt_t.data<float>();
  const float* in_w = layer.param("in_proj.weight").value.data<float>();
  ops::linear(u, rows, D, in_w, width, value_or_null(layer, "in_proj.bias", c.proj_bias), zxbcdt, pool);

  Tensor xbc_t = buffer(rows, conv_dim);
  float* xbc = xbc_t.data<float>();
  const float* conv_w = layer.param("conv1d.weight").value.data<float>();
  const float* conv_b = value_or_null(layer, "conv1d.bias", c.conv_bias);
  ops::causal_conv1d({.batch = B, .length = L, .channels = conv_dim, .kernel = c.d_conv,
                      .in = zxbcdt + d_inner, .ld_in = width, .weight = conv_w, .bias = conv_b,
                      .state = nullptr, .out = xbc, .silu = true},
                     pool);

  Tensor dt_t = buffer(rows, H);
  float* dt = dt_t.data<float>();
  const float* dt_bias = layer.param("dt_bias").value.data<float>();
  const float lo = static_cast<float>(c.dt_limit_lo), hi = static_cast<float>(c.dt_limit_hi);
  // dt_pass[r, h] = 1 where the clamp let the gradient through.
  Tensor pass_t = buffer(rows, H);
  float* pass = pass_t.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const float raw = zxbcdt[r * width + d_inner + conv_dim + h] + dt_bias[h];
      const float sp = ops::softplus(raw);
      dt[r * H + h] = std::clamp(sp, lo, hi);
      pass[r * H + h] = (sp >= lo && sp <= hi) ? ops::softplus_grad(raw) : 0.f;
    }
  std::vector<float> A(H);
  const float* A_log = layer.param("A_log").value.data<float>();
  for (int64_t h = 0; h < H; ++h) A[h] = -std::exp(A_log[h]);

  Tensor ys_t = buffer(rows, d_inner);
  float* ys = ys_t.data<float>();
  ops::SsdScanArgs scan{.batch = B, .length = L, .heads = H, .headdim = c.headdim,
                        .d_state = c.d_state, .groups = c.ngroups, .chunk = c.chunk_size,
                        .x = xbc, .ld_x = conv_dim, .B = xbc + d_inner, .C = xbc + d_inner + GN,
                        .ld_bc = conv_dim, .dt = dt, .ld_dt = H, .A = A.data(),
                        .D = layer.param("D").value.data<float>(), .y = ys, .ld_y = d_inner,
                        .state = nullptr};
  Tensor state = Tensor::zeros(DType::kF32, {B, H, c.headdim, c.d_state});
  scan.state = state.data<float>();
  ops::ssd_scan_chunked(scan, pool);
  scan.state = nullptr;

  Tensor yn_t = buffer(rows, d_inner);
  float* yn = yn_t.data<float>();
  const float* norm_w = value_or_null(layer, "norm.weight", c.rmsnorm);
  if (c.rmsnorm) {
    ops::gated_rms_norm(ys, zxbcdt, width, norm_w, rows, d_inner, d_inner / c.ngroups, c.norm_eps,
                        c.norm_before_gate, yn, pool);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < d_inner; ++i) yn[r * d_inner + i] = ys[r * d_inner + i] * ops::silu(zxbcdt[r * width + i]);
  }

  // ---- backward ----
  Tensor dyn_t = buffer(rows, d_inner);
  ops::linear_backward({.M = rows, .K = d_inner, .N = D, .x = yn,
                        .W = layer.param("out_proj.weight").value.data<float>(),
                        .dy = dy.data<float>(), .dx = dyn_t.data<float>(),
                        .dW = grad("out_proj.weight"),
                        .dbias = c.proj_bias ? grad("out_proj.bias") : nullptr},
                       pool);

  // dzxbcdt collects dz | d(conv input) | d(dt raw), the rows in_proj produced.
  Tensor dzxbcdt_t = buffer(rows, width);
  float* dzxbcdt = dzxbcdt_t.data<float>();
  Tensor dys_t = buffer(rows, d_inner);
  ops::gated_rms_norm_backward({.rows = rows, .dim = d_inner, .group = d_inner / c.ngroups,
                                .eps = c.norm_eps, .norm_before_gate = c.norm_before_gate,
                                .y = ys, .z = zxbcdt, .ldz = width, .w = norm_w,
                                .dout = dyn_t.data<float>(), .dy = dys_t.data<float>(),
                                .dz = dzxbcdt, .lddz = width,
                                .dw = c.rmsnorm ? grad("norm.weight") : nullptr},
                               pool);

  Tensor dxbc_t = buffer(rows, conv_dim);
  float* dxbc = dxbc_t.data<float>();
  Tensor ddt_t = buffer(rows, H);
  float* ddt = ddt_t.data<float>();
  std::vector<float> dA(H, 0.f);
  ops::ssd_scan_backward(scan, dys_t.data<float>(), d_inner,
                         {.dx = dxbc, .ld_dx = conv_dim, .dB = dxbc + d_inner,
                          .dC = dxbc + d_inner + GN, .ld_dbc = conv_dim, .ddt = ddt, .ld_ddt = H,
                          .dA = dA.data(), .dD = grad("D")},
                         pool);

  if (float* g = grad("A_log"))
    for (int64_t h = 0; h < H; ++h) g[h] += dA[h] * A[h];  // dA/dA_log = A
  float* g_dt_bias = grad("dt_bias");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const float d = ddt[r * H + h] * pass[r * H + h];
      dzxbcdt[r * width + d_inner + conv_dim + h] = d;
    }
  if (g_dt_bias)
    for (int64_t h = 0; h < H; ++h) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += dzxbcdt[r * width + d_inner + conv_dim + h];
      g_dt_bias[h] += static_cast<float>(s);
    }

  ops::causal_conv1d_backward({.batch = B, .length = L, .channels = conv_dim, .kernel = c.d_conv,
                               .in = zxbcdt + d_inner, .ld_in = width, .weight = conv_w,
                               .bias = conv_b, .silu = true, .dout = dxbc,
                               .din = dzxbcdt + d_inner, .ld_din = width,
                               .dweight = grad("conv1d.weight"),
                               .dbias = c.conv_bias ? grad("conv1d.bias") : nullptr},
                              pool);

  ops::linear_backward({.M = rows, .K = D, .N = width, .x = u, .W = in_w, .dy = dzxbcdt,
                        .dx = dx.data<float>(), .dW = grad("in_proj.weight"),
                        .dbias = c.proj_bias ? grad("in_proj.bias") : nullptr},
                       pool);
}

}  // namespace ssm
