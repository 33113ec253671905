// The mixture-of-experts ops token by token in double: the router's choice
// by plain sorting, each chosen expert's MLP as written in the header.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

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

}  // namespace

void add_moe_kernels(OpTable& t) {
  t.moe_route = &moe_route;
  t.routed_experts = &routed_experts;
}

}  // namespace ssm::ref
