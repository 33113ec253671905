#include "ssm/layers/mamba3_layer.h"

#include <algorithm>

#include "layers/mamba3_parts.h"
#include "ssm/ops/backend.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"
#include "ssm/tensor/convert.h"

namespace ssm {

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

std::unique_ptr<LayerState> Mamba3Layer::make_state(int64_t batch, Device device) const {
  const auto& c = cfg_;
  const int64_t H = c.nheads(), R = c.rank();
  auto s = std::make_unique<Mamba3State>();
  s->phase = Tensor::zeros(DType::kF32, {batch, H, c.n_angles()}, device);
  s->ssm = Tensor::zeros(state_dtype_, {batch, H, c.headdim, c.d_state}, device);
  s->k_prev = Tensor::zeros(DType::kF32, {batch, H, R, c.d_state}, device);
  s->v_prev = Tensor::zeros(DType::kF32, {batch, H, R, c.headdim}, device);
  return s;
}

int64_t Mamba3Layer::segment_length(int64_t batch, int64_t L, const Context& ctx) const {
  const int64_t rows = ctx.backend().sequence_segment_rows();
  if (rows <= 0) return L;
  // A whole number of chunks, so that segmenting leaves the chunks as they were.
  const int64_t steps = std::max<int64_t>(1, cfg_.chunk_size / cfg_.rank());
  return std::max<int64_t>(1, rows / batch / steps) * steps;
}

void Mamba3Layer::forward(const Tensor& x, Tensor& y, LayerState* state, Context& ctx,
                          std::unique_ptr<LayerActivations>* keep) {
  SSM_CHECK(x.ndim() == 3 && x.dim(2) == cfg_.d_model, "Mamba-3 input must be (B, L, ",
            cfg_.d_model, "), got ", x.shape());
  const int64_t B = x.dim(0), L = x.dim(1);
  auto* st = static_cast<Mamba3State*>(state);
  if (keep) {
    // Training runs the whole length at once: the backward needs all of it.
    auto a = std::make_unique<Mamba3Activations>();
    run(x, y, st, ctx, a.get());
    *keep = std::move(a);
    return;
  }
  const int64_t seg = segment_length(B, L, ctx);
  if (L <= seg) return run(x, y, st, ctx, nullptr);

  Arena::Scope scope(ctx.arena());
  // The state carried between segments: the caller's, or a fresh one.
  Mamba3State fresh;
  if (!st) {
    const auto& c = cfg_;
    const int64_t H = c.nheads(), R = c.rank();
    Arena& arena = ctx.arena();
    fresh.phase = arena.zeros(DType::kF32, {B, H, c.n_angles()});
    fresh.ssm = arena.zeros(DType::kF32, {B, H, c.headdim, c.d_state});
    fresh.k_prev = arena.zeros(DType::kF32, {B, H, R, c.d_state});
    fresh.v_prev = arena.zeros(DType::kF32, {B, H, R, c.headdim});
    st = &fresh;
  }
  // A BF16 state (set_state_dtype) is carried through the segments in F32
  // and rounded once at the end, as one scan over the whole prompt would.
  Mamba3State* const caller = st;
  Mamba3State wide;
  // On a device (whose scans take a BF16 state: OpCheck::state) through
  // the host, once each way: only prompts longer than a segment come here.
  const bool on_host = st->ssm.device().is_host();
  if (st->ssm.dtype() == DType::kBF16) {
    wide.phase = st->phase, wide.k_prev = st->k_prev, wide.v_prev = st->v_prev;
    if (on_host) {
      wide.ssm = ctx.arena().alloc(DType::kF32, st->ssm.shape());
      bf16_to_f32(st->ssm.raw(), wide.ssm.data<float>(), st->ssm.numel());
    } else {
      wide.ssm = st->ssm.to_f32().to(st->ssm.device());
    }
    st = &wide;
  }
  for (int64_t t0 = 0; t0 < L; t0 += seg) {
    const int64_t l = std::min(seg, L - t0);
    const Tensor xt = x.slice(1, t0, t0 + l), yt = y.slice(1, t0, t0 + l);
    if (B == 1) {
      run(xt, yt, st, ctx, nullptr);
      continue;
    }
    // A time segment of a batch is strided; the ops take it gathered.
    Arena::Scope segment(ctx.arena());
    const Tensor xg = ctx.arena().alloc(DType::kF32, {B, l, x.dim(2)});
    const Tensor yg = ctx.arena().alloc(DType::kF32, {B, l, y.dim(2)});
    ops::copy(ctx, xg, xt);
    run(xg, yg, st, ctx, nullptr);
    ops::copy(ctx, yt, yg);
  }
  if (st == caller) return;
  if (on_host) return f32_to_bf16(st->ssm.data<float>(), caller->ssm.raw(), caller->ssm.numel());
  const Tensor rounded = st->ssm.to_dtype(DType::kBF16);
  device_memory(caller->ssm.device()).copy_from_host(caller->ssm.device(), caller->ssm.raw(), rounded.raw(),
                                                     rounded.nbytes());
}

void Mamba3Layer::forward_add(const Tensor& x, const Tensor& h, LayerState* state, Context& ctx) {
  const int64_t B = x.dim(0), L = x.dim(1);
  if (L > segment_length(B, L, ctx)) return SequenceLayer::forward_add(x, h, state, ctx);
  run(x, h, static_cast<Mamba3State*>(state), ctx, nullptr, true);
}

void Mamba3Layer::forward_add_normed(const Tensor& h, const Tensor& norm_weight, float eps,
                                     const Tensor& normed, LayerState* state, Context& ctx) {
  // A decode step only: its few rows are what norm_linear's GPU kernel
  // fuses (longer inputs normalise once, into `normed`, as the default does).
  if (!state || h.dim(1) != 1)
    return SequenceLayer::forward_add_normed(h, norm_weight, eps, normed, state, ctx);
  const InputNorm norm{norm_weight, eps};
  run(h, h, static_cast<Mamba3State*>(state), ctx, nullptr, true, &norm);
}

std::vector<TrainableSlice> Mamba3Layer::trainable_parameters() {
  if (!wsla_) return SequenceLayer::trainable_parameters();
  // WSLA trains the B and C rows of in_proj only (SPEC §6).
  const int64_t begin = 2 * cfg_.d_inner();
  return {{in_proj_, begin, begin + 2 * cfg_.rank() * cfg_.ngroups * cfg_.d_state}};
}

}  // namespace ssm
