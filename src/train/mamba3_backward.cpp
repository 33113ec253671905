// Backward of the Mamba-3 mixer (SPEC §4), SISO and MIMO: the forward is
// recomputed from the layer input u with the forward's own ops, keeping
// what the backward reads (projections, phases, q, k, v, dt, A, lam, the
// scan output), then each op is reversed:
//   out_proj -> output (gate / norm, MIMO down-projection) -> scan
//   -> prepare (rotation, phase, norms, biases, dt, A, lam) -> in_proj.
#include "ssm/layers/mamba3_layer.h"
#include "ssm/ops/gemm.h"
#include "ssm/ops/mamba3_scan.h"
#include "ssm/train/layer_backward.h"
#include "ssm/train/ops/linear_backward.h"
#include "ssm/train/ops/mamba3_output_backward.h"
#include "ssm/train/ops/mamba3_prepare_backward.h"
#include "ssm/train/ops/mamba3_scan_backward.h"

namespace ssm {
namespace {

Tensor buffer(int64_t n) { return Tensor::empty(DType::kF32, {n}); }

const float* value_or_null(const SequenceLayer& layer, const std::string& name, bool present) {
  return present ? layer.param(name).value.data<float>() : nullptr;
}

}  // namespace

void backward_mamba3(SequenceLayer& layer, const Tensor& x, const Tensor& dy, Tensor& dx,
                     std::vector<Tensor>& grads, Context& ctx) {
  auto* m3 = dynamic_cast<Mamba3Layer*>(&layer);
  SSM_CHECK(m3, "backward_mamba3 called on a ", layer.kind(), " layer");
  const Mamba3Config& c = m3->config();
  ThreadPool& pool = ctx.pool();
  const int64_t B = x.dim(0), L = x.dim(1), rows = B * L, D = c.d_model;
  const int64_t H = c.nheads(), P = c.headdim, N = c.d_state, G = c.ngroups, R = c.rank();
  const int64_t d_inner = c.d_inner(), width = c.d_in_proj(), RGN = R * G * N, S = c.n_angles();
  const float* u = x.data<float>();
  auto value = [&](const char* name, bool present = true) {
    return value_or_null(layer, name, present);
  };
  auto grad = [&](const char* name, bool present = true) {
    return present ? detail::grad_of(layer, grads, name) : nullptr;
  };

  // ---- forward recomputation ----
  Tensor proj_t = buffer(rows * width);
  float* proj = proj_t.data<float>();
  const float* in_w = value("in_proj.weight");
  ops::linear(u, rows, D, in_w, width, nullptr, proj, pool);
  const float* ddt_in = proj + 2 * d_inner + 2 * RGN;

  Tensor phase = Tensor::zeros(DType::kF32, {B, H, S});
  Tensor bn = buffer(rows * RGN), cn = buffer(rows * RGN), rate = buffer(rows * S);
  Tensor phases = buffer(rows * H * S);
  Tensor dt = buffer(rows * H), A = buffer(rows * H), lam = buffer(rows * H);
  Tensor q = buffer(rows * H * R * N), k = buffer(rows * H * R * N), v = buffer(rows * H * R * P);
  const ops::Mamba3PrepareArgs prep{
      .batch = B, .length = L, .heads = H, .headdim = P, .d_state = N, .groups = G, .rank = R,
      .n_angles = S, .pairs = c.is_mimo ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
      .x = proj + d_inner, .B = proj + 2 * d_inner, .C = proj + 2 * d_inner + RGN,
      .ddt = ddt_in, .ddA = ddt_in + H, .trap = ddt_in + 2 * H, .ang = ddt_in + 3 * H, .ld = width,
      .dt_bias = value("dt_bias"), .B_norm = value("B_norm.weight"),
      .C_norm = value("C_norm.weight"),
      .B_bias = value("B_bias"), .C_bias = value("C_bias"), .mimo_x = value("mimo_x", c.is_mimo),
      .A_floor = static_cast<float>(c.A_floor), .norm_eps = c.norm_eps,
      .phase = phase.data<float>(), .B_normed = bn.data<float>(), .C_normed = cn.data<float>(),
      .ang_rate = rate.data<float>(), .dt = dt.data<float>(), .A = A.data<float>(),
      .lam = lam.data<float>(), .q = q.data<float>(), .k = k.data<float>(), .v = v.data<float>(),
      .phases = phases.data<float>()};
  ops::mamba3_prepare(prep, pool);

  Tensor ssm = Tensor::zeros(DType::kF32, {B, H, P, N});
  Tensor k_prev = Tensor::zeros(DType::kF32, {B, H, R, N});
  Tensor v_prev = Tensor::zeros(DType::kF32, {B, H, R, P});
  Tensor o = buffer(rows * H * R * P);
  ops::Mamba3ScanArgs scan{
      .batch = B, .length = L, .heads = H, .headdim = P, .d_state = N, .rank = R,
      .chunk = c.chunk_size, .q = prep.q, .k = prep.k, .v = prep.v, .dt = prep.dt, .A = prep.A,
      .lam = prep.lam, .D = value("D"), .o = o.data<float>(), .ssm = ssm.data<float>(),
      .k_prev = k_prev.data<float>(), .v_prev = v_prev.data<float>()};
  ops::mamba3_scan_chunked(scan, pool);

  Tensor ys = buffer(rows * d_inner);
  const ops::Mamba3OutputArgs out{
      .batch = B, .length = L, .heads = H, .headdim = P, .rank = R, .o = scan.o, .z = proj,
      .ld_z = width, .mimo_z = value("mimo_z", c.is_mimo), .mimo_o = value("mimo_o", c.is_mimo),
      .norm = value("norm.weight", c.is_outproj_norm), .norm_eps = c.norm_eps,
      .y = ys.data<float>(), .ld_y = d_inner};
  ops::mamba3_output(out, pool);

  // ---- backward ----
  Tensor dys = buffer(rows * d_inner);
  ops::linear_backward({.M = rows, .K = d_inner, .N = D, .x = ys.data<float>(),
                        .W = value("out_proj.weight"), .dy = dy.data<float>(),
                        .dx = dys.data<float>(), .dW = grad("out_proj.weight")},
                       pool);
  ys = Tensor();  // buffers are released once read for the last time

  // dproj collects the gradients of every in_proj segment.
  Tensor dproj_t = buffer(rows * width);
  float* dproj = dproj_t.data<float>();
  Tensor d_o = buffer(rows * H * R * P);
  ops::mamba3_output_backward(out,
                              {.dy = dys.data<float>(), .ld_dy = d_inner, .d_o = d_o.data<float>(),
                               .dz = dproj, .ld_dz = width, .dmimo_z = grad("mimo_z", c.is_mimo),
                               .dmimo_o = grad("mimo_o", c.is_mimo),
                               .dnorm = grad("norm.weight", c.is_outproj_norm)},
                              pool);
  o = dys = Tensor();

  Tensor dq = buffer(rows * H * R * N), dk = buffer(rows * H * R * N);
  Tensor dv = buffer(rows * H * R * P);
  Tensor ddt = buffer(rows * H), dA = buffer(rows * H), dlam = buffer(rows * H);
  scan.ssm = scan.k_prev = scan.v_prev = nullptr;  // the sequences started fresh
  ops::mamba3_scan_backward(scan, d_o.data<float>(),
                            {.dq = dq.data<float>(), .dk = dk.data<float>(), .dv = dv.data<float>(),
                             .ddt = ddt.data<float>(), .dA = dA.data<float>(),
                             .dlam = dlam.data<float>(), .dD = grad("D")},
                            pool);

  float* dddt = dproj + 2 * d_inner + 2 * RGN;
  ops::mamba3_prepare_backward(
      prep, {.dq = dq.data<float>(), .dk = dk.data<float>(), .dv = dv.data<float>(),
             .ddt = ddt.data<float>(), .dA = dA.data<float>(), .dlam = dlam.data<float>(),
             .dx = dproj + d_inner, .dB = dproj + 2 * d_inner, .dC = dproj + 2 * d_inner + RGN,
             .dddt = dddt, .dddA = dddt + H, .dtrap = dddt + 2 * H, .dang = dddt + 3 * H,
             .ld = width,
             .ddt_bias = grad("dt_bias"), .dB_norm = grad("B_norm.weight"),
             .dC_norm = grad("C_norm.weight"), .dB_bias = grad("B_bias"), .dC_bias = grad("C_bias"),
             .dmimo_x = grad("mimo_x", c.is_mimo)},
      pool);

  ops::linear_backward({.M = rows, .K = D, .N = width, .x = u, .W = in_w, .dy = dproj,
                        .dx = dx.data<float>(), .dW = grad("in_proj.weight")},
                       pool);
}

}  // namespace ssm
