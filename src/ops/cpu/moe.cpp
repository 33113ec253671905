// The mixture-of-experts ops on the cpu backend. routed_experts sorts the
// (token, slot) pairs by expert (a counting sort, stable, so the order is
// fixed), gathers each expert's tokens into contiguous rows and runs its two
// projections as matrix products over them, one expert per task of the
// pool; each pair's result lands in its own row, and the k rows of a token
// are summed in slot order afterwards.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/cpu/blas.h"
#include "ops/moe_backward_math.h"
#include "ops/moe_weights.h"
#include "ops/cpu/kernels.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"
#include "ssm/ops/moe.h"

namespace ssm::cpu {
namespace {

using ops::elements;

// Scratch of n int64 values from the arena: decoding allocates nothing.
int64_t* scratch_i64(Context& ctx, int64_t n) { return elements<int64_t>(ctx.arena().alloc(DType::kI64, {n})); }
float* scratch_f32(Context& ctx, int64_t n) { return elements<float>(ctx.arena().alloc(DType::kF32, {n})); }

// Experts outside the topk_group best groups (a group's score: the sum of
// its two best choice values) get -inf, so that they are never chosen.
// `order` is scratch of n_group entries.
void keep_best_groups(float* choice, int64_t E, int64_t n_group, int64_t topk_group, float* score,
                      int64_t* order) {
  const int64_t S = E / n_group;
  for (int64_t g = 0; g < n_group; ++g) {
    const float* c = choice + g * S;
    float best = -std::numeric_limits<float>::infinity(), second = best;
    for (int64_t i = 0; i < S; ++i) {
      if (c[i] > best) {
        second = best;
        best = c[i];
      } else if (c[i] > second) {
        second = c[i];
      }
    }
    score[g] = best + second;
  }
  std::iota(order, order + n_group, int64_t{0});
  std::partial_sort(order, order + topk_group, order + n_group, [&](int64_t x, int64_t y) {
    return score[x] > score[y] || (score[x] == score[y] && x < y);
  });
  for (int64_t j = topk_group; j < n_group; ++j)
    std::fill_n(choice + order[j] * S, S, -std::numeric_limits<float>::infinity());
}

void moe_route(Context& ctx, const ops::MoeRouteArgs& a) {
  const int64_t T = a.logits.rows(), E = a.logits.cols(), k = a.k;
  const ops::Rows<const float> logits(a.logits);
  const ops::Rows<float> weights(a.weights);
  int64_t* idx = elements<int64_t>(a.idx);
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  float* v = scratch_f32(ctx, E);
  float* choice = scratch_f32(ctx, E);
  int64_t* order = scratch_i64(ctx, E);
  float* group_score = scratch_f32(ctx, a.n_group);
  for (int64_t t = 0; t < T; ++t) {
    std::copy(logits[t], logits[t] + E, v);
    if (a.router == ops::Router::kSoftmaxTopk) {
      const float mx = *std::max_element(v, v + E);
      float sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += v[e] = std::exp(v[e] - mx);
      for (int64_t e = 0; e < E; ++e) v[e] /= sum;
    } else if (a.router == ops::Router::kSigmoidBiased) {
      for (int64_t e = 0; e < E; ++e) v[e] = ops::sigmoid(v[e]);
    }
    for (int64_t e = 0; e < E; ++e) choice[e] = v[e] + (bias ? bias[e] : 0.f);
    if (a.n_group > 1) keep_best_groups(choice, E, a.n_group, a.topk_group, group_score, order);
    std::iota(order, order + E, int64_t{0});
    std::partial_sort(order, order + k, order + E, [&](int64_t x, int64_t y) {
      return choice[x] > choice[y] || (choice[x] == choice[y] && x < y);
    });
    float* w = weights[t];
    if (a.router == ops::Router::kTopkSoftmax) {
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += w[j] = std::exp(v[order[j]] - v[order[0]]);
      for (int64_t j = 0; j < k; ++j) w[j] /= sum;
    } else {
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += w[j] = v[order[j]];
      if (a.router == ops::Router::kSigmoidBiased)
        for (int64_t j = 0; j < k; ++j) w[j] = (a.normalize ? w[j] / (sum + 1e-20f) : w[j]) * a.scale;
    }
    for (int64_t j = 0; j < k; ++j) idx[t * k + j] = order[j];
  }
}

void routed_experts(Context& ctx, const ops::RoutedExpertsArgs& a) {
  const int64_t T = a.x.rows(), D = a.x.cols(), k = a.idx.dim(1), F = ops::expert_hidden(a);
  const int64_t E = ops::expert_count(a);
  const bool gated = a.activation == ops::ExpertActivation::kSiluGated;
  const int64_t w1_rows = gated ? 2 * F : F, P = T * k;
  const int64_t* idx = a.idx.data<int64_t>();
  // Pairs p = t * k + j sorted by expert: begin[e] .. begin[e + 1] in pairs[].
  int64_t* begin = scratch_i64(ctx, E + 1);
  int64_t* pairs = scratch_i64(ctx, P);
  int64_t* fill = scratch_i64(ctx, E);
  std::fill_n(begin, E + 1, int64_t{0});
  for (int64_t p = 0; p < P; ++p) ++begin[idx[p] + 1];
  for (int64_t e = 0; e < E; ++e) begin[e + 1] += begin[e];
  std::copy_n(begin, E, fill);
  for (int64_t p = 0; p < P; ++p) pairs[fill[idx[p]]++] = p;

  const Tensor xs = ctx.arena().alloc(DType::kF32, {P, D});
  const Tensor hs = ctx.arena().alloc(DType::kF32, {P, w1_rows});
  const Tensor ys = ctx.arena().alloc(DType::kF32, {P, D});  // by pair index p
  const ops::Rows<const float> x(a.x);
  float* xg = elements<float>(xs);
  float* hg = elements<float>(hs);
  float* yp = elements<float>(ys);
  ctx.pool().parallel_for(E, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t b = begin[e], n = begin[e + 1] - b;
      if (n == 0) continue;
      for (int64_t i = 0; i < n; ++i) std::copy_n(x[pairs[b + i] / k], D, xg + (b + i) * D);
      float* h = hg + b * w1_rows;
      const ops::ExpertWeights w = ops::expert_weights(a, e, F, D);
      for (int64_t blk = 0; blk < w.w1_blocks; ++blk)
        gemm(false, true, n, F, D, 1.f, xg + b * D, D, w.w1[blk], D, 0.f, h + blk * F, w1_rows);
      for (int64_t i = 0; i < n; ++i) {
        float* r = h + i * w1_rows;
        for (int64_t f = 0; f < F; ++f) {
          if (gated) {
            r[f] = ops::silu(r[f]) * r[F + f];
          } else {
            const float p = std::max(0.f, r[f]);
            r[f] = p * p;
          }
        }
      }
      // The expert's outputs go to a gathered block, then to their pairs' rows.
      float* yg = xg + b * D;  // the gathered inputs are no longer needed
      gemm(false, true, n, D, F, 1.f, h, w1_rows, w.w2, F, 0.f, yg, D);
      for (int64_t i = 0; i < n; ++i) std::copy_n(yg + i * D, D, yp + pairs[b + i] * D);
    }
  });
  const ops::Rows<const float> weights(a.weights);
  const ops::Rows<float> out(a.out);
  ctx.pool().parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out[t];
      if (!a.accumulate) std::fill_n(o, D, 0.f);
      for (int64_t j = 0; j < k; ++j) {
        const float w = weights[t][j];
        const float* y = yp + (t * k + j) * D;
        for (int64_t d = 0; d < D; ++d) o[d] += w * y[d];
      }
    }
  });
}


void moe_route_backward(Context& ctx, const ops::MoeRouteBackwardArgs& a) {
  const int64_t T = a.logits.rows(), E = a.logits.cols(), k = a.idx.dim(1);
  const ops::Rows<const float> logits(a.logits), dw(a.dweights);
  const ops::Rows<float> dl(a.dlogits);
  float* p = scratch_f32(ctx, E);
  for (int64_t t = 0; t < T; ++t)
    ops::route_backward_row<float, float>(a, logits[t], a.idx.data<int64_t>() + t * k, dw[t], E, k, dl[t], p);
}

// One expert per task (its weight gradients are its own); each (token,
// slot) pair's dx lands in a row of its own, and a token's k rows are
// summed in slot order afterwards, so nothing depends on the threads.
void routed_experts_backward(Context& ctx, const ops::RoutedExpertsBackwardArgs& a) {
  const ops::RoutedExpertsArgs& f = a.fwd;
  const int64_t T = f.x.rows(), D = f.x.cols(), k = f.idx.dim(1), F = ops::expert_hidden(f);
  const int64_t E = ops::expert_count(f), P = T * k;
  const bool gated = f.activation == ops::ExpertActivation::kSiluGated;
  const bool want = a.dw1.defined() || !a.ddown.empty();
  const int64_t* idx = f.idx.data<int64_t>();
  int64_t* begin = scratch_i64(ctx, E + 1);
  int64_t* pairs = scratch_i64(ctx, P);
  int64_t* fill = scratch_i64(ctx, E);
  std::fill_n(begin, E + 1, int64_t{0});
  for (int64_t p = 0; p < P; ++p) ++begin[idx[p] + 1];
  for (int64_t e = 0; e < E; ++e) begin[e + 1] += begin[e];
  std::copy_n(begin, E, fill);
  for (int64_t p = 0; p < P; ++p) pairs[fill[idx[p]]++] = p;
  float* dxp = scratch_f32(ctx, P * D);
  std::fill_n(dxp, P * D, 0.f);
  ops::RoutedExpertsArgs ga = f;
  ga.w1 = a.dw1, ga.w2 = a.dw2, ga.gate = a.dgate, ga.up = a.dup, ga.down = a.ddown;
  const ops::Rows<const float> x(f.x), weights(f.weights), dout(a.dout);
  const ops::Rows<float> dweights(a.dweights);
  ctx.pool().parallel_for(E, [&](int64_t e0, int64_t e1) {
    std::vector<float> h, act, dact;
    for (int64_t e = e0; e < e1; ++e) {
      if (begin[e + 1] == begin[e]) continue;
      ops::ExpertGrads<float> g;
      if (want) {
        const ops::ExpertWeights gw = ops::expert_weights(ga, e, F, D);
        g.w1[0] = const_cast<float*>(gw.w1[0]);
        g.w1[1] = const_cast<float*>(gw.w1[1]);
        g.w2 = const_cast<float*>(gw.w2);
      }
      const ops::ExpertWeights w = ops::expert_weights(f, e, F, D);
      for (int64_t i = begin[e]; i < begin[e + 1]; ++i) {
        const int64_t p = pairs[i], t = p / k, j = p % k;
        dweights[t][j] = ops::expert_token_backward<float>(w, gated, F, D, x[t], weights[t][j], dout[t],
                                                           g, dxp + p * D, h, act, dact);
      }
    }
  });
  const ops::Rows<float> dx(a.dx);
  ctx.pool().parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = dx[t];
      if (!a.accumulate_dx) std::fill_n(o, D, 0.f);
      for (int64_t j = 0; j < k; ++j)
        for (int64_t d = 0; d < D; ++d) o[d] += dxp[(t * k + j) * D + d];
    }
  });
}

}  // namespace

void add_moe_kernels(OpTable& t) {
  t.moe_route = &moe_route;
  t.routed_experts = &routed_experts;
  t.moe_route_backward = &moe_route_backward;
  t.routed_experts_backward = &routed_experts_backward;
}

}  // namespace ssm::cpu
