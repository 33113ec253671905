// The mixture-of-experts ops token by token in double: the router's choice
// by plain sorting, each chosen expert's MLP as written in the header.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ops/moe_backward_math.h"
#include "ops/moe_weights.h"
#include "ops/ref/kernels.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"
#include "ssm/ops/moe.h"

namespace ssm::ref {
namespace {

using ops::elements;

// The k indices of the largest values, largest first, ties to the lower index.
std::vector<int64_t> top_k(const std::vector<double>& v, int64_t k) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[a] > v[b]; });
  order.resize(static_cast<size_t>(k));
  return order;
}

// Group-limited choice: experts outside the topk_group best groups (each
// scored by its two best choice values) can no longer be chosen.
void keep_best_groups(std::vector<double>& choice, int64_t n_group, int64_t topk_group) {
  const int64_t S = static_cast<int64_t>(choice.size()) / n_group;
  std::vector<double> score(static_cast<size_t>(n_group));
  for (int64_t g = 0; g < n_group; ++g) {
    const std::vector<double> group(choice.begin() + g * S, choice.begin() + (g + 1) * S);
    const std::vector<int64_t> best = top_k(group, 2);
    score[g] = group[best[0]] + group[best[1]];
  }
  std::vector<bool> kept(static_cast<size_t>(n_group), false);
  for (int64_t g : top_k(score, topk_group)) kept[g] = true;
  for (int64_t e = 0; e < static_cast<int64_t>(choice.size()); ++e)
    if (!kept[e / S]) choice[e] = -std::numeric_limits<double>::infinity();
}

void moe_route(Context&, const ops::MoeRouteArgs& a) {
  const int64_t T = a.logits.rows(), E = a.logits.cols(), k = a.k;
  const ops::Rows<const float> logits(a.logits);
  const ops::Rows<float> weights(a.weights);
  int64_t* idx = elements<int64_t>(a.idx);
  std::vector<double> v(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) v[e] = logits[t][e];
    std::vector<double> w(static_cast<size_t>(k));
    std::vector<int64_t> chosen;
    if (a.router == ops::Router::kTopkSoftmax) {
      chosen = top_k(v, k);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += w[j] = std::exp(v[chosen[j]] - v[chosen[0]]);
      for (double& x : w) x /= sum;
    } else if (a.router == ops::Router::kSoftmaxTopk) {
      const double mx = *std::max_element(v.begin(), v.end());
      double sum = 0;
      for (double& x : v) sum += x = std::exp(x - mx);
      for (double& x : v) x /= sum;
      chosen = top_k(v, k);
      for (int64_t j = 0; j < k; ++j) w[j] = v[chosen[j]];
    } else {
      for (int64_t e = 0; e < E; ++e) {
        v[e] = ops::sigmoid(v[e]);
        choice[e] = v[e] + (a.bias.defined() ? a.bias.data<float>()[e] : 0.f);
      }
      if (a.n_group > 1) keep_best_groups(choice, a.n_group, a.topk_group);
      chosen = top_k(choice, k);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += w[j] = v[chosen[j]];
      for (double& x : w) x = (a.normalize ? x / (sum + 1e-20) : x) * a.scale;
    }
    for (int64_t j = 0; j < k; ++j) {
      idx[t * k + j] = chosen[j];
      weights[t][j] = static_cast<float>(w[j]);
    }
  }
}

void routed_experts(Context&, const ops::RoutedExpertsArgs& a) {
  const int64_t T = a.x.rows(), D = a.x.cols(), k = a.idx.dim(1), F = ops::expert_hidden(a);
  const bool gated = a.activation == ops::ExpertActivation::kSiluGated;
  const int64_t w1_rows = gated ? 2 * F : F;
  const ops::Rows<const float> x(a.x), weights(a.weights);
  const ops::Rows<float> out(a.out);
  const int64_t* idx = a.idx.data<int64_t>();
  std::vector<double> h(static_cast<size_t>(w1_rows)), act(static_cast<size_t>(F)), sum(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const ops::ExpertWeights ew = ops::expert_weights(a, idx[t * k + j], F, D);
      for (int64_t r = 0; r < w1_rows; ++r) {
        double acc = 0;
        const float* row = ew.w1[r / F] + (r % F) * D;
        for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(row[d]) * x[t][d];
        h[r] = acc;
      }
      for (int64_t f = 0; f < F; ++f) {
        if (gated) {
          act[f] = ops::silu(h[f]) * h[F + f];
        } else {
          const double p = std::max(0.0, h[f]);
          act[f] = p * p;
        }
      }
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        const float* row = ew.w2 + d * F;
        for (int64_t f = 0; f < F; ++f) acc += static_cast<double>(row[f]) * act[f];
        sum[d] += weights[t][j] * acc;
      }
    }
    for (int64_t d = 0; d < D; ++d)
      out[t][d] = static_cast<float>(a.accumulate ? out[t][d] + sum[d] : sum[d]);
  }
}


void moe_route_backward(Context&, const ops::MoeRouteBackwardArgs& a) {
  const int64_t T = a.logits.rows(), E = a.logits.cols(), k = a.idx.dim(1);
  const ops::Rows<const float> logits(a.logits), dw(a.dweights);
  const ops::Rows<float> dl(a.dlogits);
  std::vector<double> g(static_cast<size_t>(E)), p(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    ops::route_backward_row<double, float>(a, logits[t], a.idx.data<int64_t>() + t * k, dw[t], E, k, g.data(), p.data());
    for (int64_t e = 0; e < E; ++e) dl[t][e] = static_cast<float>(g[e]);
  }
}

// Token by token, every chosen expert's backward in double; the weight
// gradients summed in double buffers of their own, added at the end.
void routed_experts_backward(Context&, const ops::RoutedExpertsBackwardArgs& a) {
  const ops::RoutedExpertsArgs& f = a.fwd;
  const int64_t T = f.x.rows(), D = f.x.cols(), k = f.idx.dim(1), F = ops::expert_hidden(f);
  const int64_t E = ops::expert_count(f);
  const bool gated = f.activation == ops::ExpertActivation::kSiluGated;
  const int64_t w1_rows = gated ? 2 * F : F, per = w1_rows * D + D * F;
  const bool want = a.dw1.defined() || !a.ddown.empty();
  std::vector<double> gw(want ? static_cast<size_t>(E * per) : 0);
  const ops::Rows<const float> x(f.x), weights(f.weights), dout(a.dout);
  const ops::Rows<float> dx(a.dx), dweights(a.dweights);
  const int64_t* idx = f.idx.data<int64_t>();
  std::vector<double> dxs(static_cast<size_t>(D)), h, act, dact;
  for (int64_t t = 0; t < T; ++t) {
    std::fill(dxs.begin(), dxs.end(), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = idx[t * k + j];
      ops::ExpertGrads<double> g;
      if (want) {
        double* base = gw.data() + e * per;
        g.w1[0] = base;
        g.w1[1] = base + F * D;
        g.w2 = base + w1_rows * D;
      }
      dweights[t][j] = static_cast<float>(ops::expert_token_backward<double>(
          ops::expert_weights(f, e, F, D), gated, F, D, x[t], weights[t][j], dout[t], g, dxs.data(), h, act, dact));
    }
    for (int64_t d = 0; d < D; ++d) dx[t][d] = static_cast<float>(a.accumulate_dx ? dx[t][d] + dxs[d] : dxs[d]);
  }
  if (!want) return;
  // The gradients' layout is the weights': expert_weights over them.
  ops::RoutedExpertsArgs ga = f;
  ga.w1 = a.dw1, ga.w2 = a.dw2, ga.gate = a.dgate, ga.up = a.dup, ga.down = a.ddown;
  for (int64_t e = 0; e < E; ++e) {
    const ops::ExpertWeights gwe = ops::expert_weights(ga, e, F, D);
    const double* base = gw.data() + e * per;
    for (int64_t r = 0; r < w1_rows; ++r) {
      float* row = const_cast<float*>(gwe.w1[r / F]) + (r % F) * D;
      for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(row[d] + base[r * D + d]);
    }
    float* w2 = const_cast<float*>(gwe.w2);
    for (int64_t i = 0; i < D * F; ++i) w2[i] = static_cast<float>(w2[i] + base[w1_rows * D + i]);
  }
}

}  // namespace

void add_moe_kernels(OpTable& t) {
  t.moe_route = &moe_route;
  t.routed_experts = &routed_experts;
  t.moe_route_backward = &moe_route_backward;
  t.routed_experts_backward = &routed_experts_backward;
}

}  // namespace ssm::ref
