#include "ssm/layers/mamba3_layer.h"

#include <algorithm>

#include "ssm/ops/gemm.h"
#include "ssm/ops/mamba3_scan.h"

namespace ssm {
namespace {

// Grows a workspace tensor to at least n floats; never shrinks.
float* scratch(Tensor& t, int64_t n) {
  if (!t.defined() || t.numel() < n) t = Tensor::empty(DType::kF32, {n});
  return t.data<float>();
}

const float* data_of(const Param* p) { return p ? p->value.data<float>() : nullptr; }

}  // namespace

Mamba3Layer::Mamba3Layer(const Mamba3Config& config) : cfg_(config) {
  const auto& c = cfg_;
  const int64_t H = c.nheads(), R = c.rank(), N = c.d_state, P = c.headdim;
  SSM_CHECK(H > 0 && c.d_inner() == H * P && H % c.ngroups == 0, "invalid Mamba-3 shape");
  add_param("in_proj.weight", {c.d_in_proj(), c.d_model});
  add_param("dt_bias", {H}, ParamRole::kNoDecay);
  add_param("B_bias", {H, R, N}, ParamRole::kNoDecay);
  add_param("C_bias", {H, R, N}, ParamRole::kNoDecay);
  add_param("B_norm.weight", {N}, ParamRole::kNoDecay);
  add_param("C_norm.weight", {N}, ParamRole::kNoDecay);
  add_param("D", {H}, ParamRole::kNoDecay);
  if (c.is_outproj_norm) add_param("norm.weight", {c.d_inner()}, ParamRole::kNoDecay);
  if (c.is_mimo) {
    // Per-head channel scales initialised to 1/R or 1, like norms: no decay.
    add_param("mimo_x", {H, R, P}, ParamRole::kNoDecay);
    add_param("mimo_z", {H, R, P}, ParamRole::kNoDecay);
    add_param("mimo_o", {H, R, P}, ParamRole::kNoDecay);
  }
  add_param("out_proj.weight", {c.d_model, c.d_inner()});

  // params_ no longer grows, so pointers into it stay valid.
  auto find = [&](const char* name, bool present) { return present ? &param(name) : nullptr; };
  in_proj_ = find("in_proj.weight", true);
  out_proj_ = find("out_proj.weight", true);
  dt_bias_ = find("dt_bias", true);
  D_ = find("D", true);
  B_bias_ = find("B_bias", true);
  C_bias_ = find("C_bias", true);
  B_norm_ = find("B_norm.weight", true);
  C_norm_ = find("C_norm.weight", true);
  norm_ = find("norm.weight", c.is_outproj_norm);
  mimo_x_ = find("mimo_x", c.is_mimo);
  mimo_z_ = find("mimo_z", c.is_mimo);
  mimo_o_ = find("mimo_o", c.is_mimo);
}

std::unique_ptr<LayerState> Mamba3Layer::make_state(int64_t batch) const {
  const auto& c = cfg_;
  const int64_t H = c.nheads(), R = c.rank();
  auto s = std::make_unique<Mamba3State>();
  s->phase = Tensor::zeros(DType::kF32, {batch, H, c.n_angles()});
  s->ssm = Tensor::zeros(DType::kF32, {batch, H, c.headdim, c.d_state});
  s->k_prev = Tensor::zeros(DType::kF32, {batch, H, R, c.d_state});
  s->v_prev = Tensor::zeros(DType::kF32, {batch, H, R, c.headdim});
  return s;
}

void Mamba3Layer::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx) {
  SSM_CHECK(x.ndim() == 3 && x.dim(2) == cfg_.d_model, "Mamba-3 input must be (B, L, ",
            cfg_.d_model, "), got ", shape_str(x.shape()));
  const int64_t B = x.dim(0), L = x.dim(1);
  std::unique_ptr<LayerState> fresh;
  if (!state) {
    fresh = make_state(B);
    state = fresh.get();
  }
  auto& st = static_cast<Mamba3State&>(*state);
  // One step needs no chunks: the sequential form is the same math, cheaper.
  const bool sequential = reference_scan_ || L == 1;
  const int64_t seg = segment_length(B);
  if (L <= seg) {
    run(x.data<float>(), B, L, y.data<float>(), st, sequential, ctx);
    return;
  }
  // Long inputs go through in segments, the state carried between them, so
  // that the workspace stays bounded however long the prompt.
  const int64_t D = cfg_.d_model;
  for (int64_t t0 = 0; t0 < L; t0 += seg) {
    const int64_t l = std::min(seg, L - t0);
    if (B == 1) {
      run(x.data<float>() + t0 * D, 1, l, y.data<float>() + t0 * D, st, sequential, ctx);
      continue;
    }
    float* xs = scratch(x_seg_, B * l * D);
    float* ys = scratch(y_seg_, B * l * D);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(x.data<float>() + (b * L + t0) * D, l * D, xs + b * l * D);
    run(xs, B, l, ys, st, sequential, ctx);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(ys + b * l * D, l * D, y.data<float>() + (b * L + t0) * D);
  }
}

int64_t Mamba3Layer::segment_length(int64_t batch) const {
  // A whole number of chunks, so that segmenting leaves the chunks as they were.
  const int64_t steps = std::max<int64_t>(1, cfg_.chunk_size / cfg_.rank());
  return std::max<int64_t>(1, kSegmentRows / batch / steps) * steps;
}

void Mamba3Layer::step(const Tensor& x, Tensor& y, LayerState& state, Context& ctx) {
  SSM_CHECK(x.ndim() == 2 && x.dim(1) == cfg_.d_model, "Mamba-3 step input must be (B, ",
            cfg_.d_model, "), got ", shape_str(x.shape()));
  run(x.data<float>(), x.dim(0), 1, y.data<float>(), static_cast<Mamba3State&>(state), true, ctx);
}

void Mamba3Layer::run(const float* x, int64_t B, int64_t L, float* y, Mamba3State& st,
                      bool sequential, Context& ctx) {
  const auto& c = cfg_;
  const int64_t rows = B * L, H = c.nheads(), P = c.headdim, N = c.d_state, G = c.ngroups;
  const int64_t R = c.rank(), d_inner = c.d_inner(), width = c.d_in_proj(), RGN = R * G * N;
  SSM_CHECK(st.ssm.dim(0) == B, "state holds ", st.ssm.dim(0), " sequences, input has ", B);
  ThreadPool& pool = ctx.pool();

  // [z | x | B | C | ddt | ddA | trap | ang] = u @ in_proj^T
  float* proj = scratch(proj_, rows * width);
  ops::linear(x, rows, c.d_model, data_of(in_proj_), width, nullptr, proj, pool);
  const float* z = proj;
  const float* ddt = proj + 2 * d_inner + 2 * RGN;

  // clang-format off
  // dt, A, lam; q, k from normed, biased, rotated C, B; v = x * mimo_x.
  ops::Mamba3PrepareArgs prep{
      .batch = B, .length = L, .heads = H, .headdim = P, .d_state = N, .groups = G, .rank = R,
      .n_angles = c.n_angles(),
      .pairs = c.is_mimo ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
      .x = proj + d_inner, .B = proj + 2 * d_inner, .C = proj + 2 * d_inner + RGN,
      .ddt = ddt, .ddA = ddt + H, .trap = ddt + 2 * H, .ang = ddt + 3 * H, .ld = width,
      .dt_bias = data_of(dt_bias_), .B_norm = data_of(B_norm_), .C_norm = data_of(C_norm_),
      .B_bias = data_of(B_bias_), .C_bias = data_of(C_bias_), .mimo_x = data_of(mimo_x_),
      .A_floor = static_cast<float>(c.A_floor), .norm_eps = c.norm_eps,
      .phase = st.phase.data<float>(),
      .B_normed = scratch(bn_, rows * RGN), .C_normed = scratch(cn_, rows * RGN),
      .ang_rate = scratch(rate_, rows * c.n_angles()),
      .dt = scratch(dt_, rows * H), .A = scratch(A_, rows * H), .lam = scratch(lam_, rows * H),
      .q = scratch(q_, rows * H * R * N), .k = scratch(k_, rows * H * R * N),
      .v = scratch(v_, rows * H * R * P)};
  ops::mamba3_prepare(prep, pool);

  // The trapezoidal recurrence: o_t,r = S_t q_t,r + D v_t,r.
  ops::Mamba3ScanArgs scan{
      .batch = B, .length = L, .heads = H, .headdim = P, .d_state = N, .rank = R,
      .chunk = c.chunk_size, .q = prep.q, .k = prep.k, .v = prep.v,
      .dt = prep.dt, .A = prep.A, .lam = prep.lam, .D = data_of(D_),
      .o = scratch(o_, rows * H * R * P),
      .ssm = st.ssm.data<float>(), .k_prev = st.k_prev.data<float>(),
      .v_prev = st.v_prev.data<float>()};
  if (sequential) ops::mamba3_scan_sequential(scan, pool);
  else ops::mamba3_scan_chunked(scan, pool);

  // y_h = sum_r [RMSNorm(o_r) * w] * SiLU(z * mimo_z_r) * mimo_o_r
  float* ys = scratch(ys_, rows * d_inner);
  ops::Mamba3OutputArgs out{
      .batch = B, .length = L, .heads = H, .headdim = P, .rank = R, .o = scan.o,
      .z = z, .ld_z = width, .mimo_z = data_of(mimo_z_), .mimo_o = data_of(mimo_o_),
      .norm = data_of(norm_), .norm_eps = c.norm_eps, .y = ys, .ld_y = d_inner};
  ops::mamba3_output(out, pool);
  // clang-format on

  ops::linear(ys, rows, d_inner, data_of(out_proj_), c.d_model, nullptr, y, pool);
}

std::vector<TrainableSlice> Mamba3Layer::trainable_parameters() {
  if (!wsla_) return SequenceLayer::trainable_parameters();
  // WSLA trains the B and C rows of in_proj only (SPEC §6).
  const int64_t begin = 2 * cfg_.d_inner();
  return {{in_proj_, begin, begin + 2 * cfg_.rank() * cfg_.ngroups * cfg_.d_state}};
}

}  // namespace ssm
