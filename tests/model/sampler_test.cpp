// The sampler against a plain reference computation of each filter (a full
// stable sort, masks from their definitions, one softmax), the repetition
// penalty against HF's rule, and the draw against its probabilities.
#include "ssm/model/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "ssm/core/error.h"
#include "support/random.h"

namespace ssm {
namespace {

// HF's repetition penalty: every distinct recent id once.
std::vector<float> reference_penalty(std::vector<float> l, const std::vector<int64_t>& recent, float penalty) {
  for (int64_t id : std::set<int64_t>(recent.begin(), recent.end()))
    if (id >= 0 && id < static_cast<int64_t>(l.size())) l[id] = l[id] > 0 ? l[id] / penalty : l[id] * penalty;
  return l;
}

std::map<int32_t, double> reference_distribution(std::vector<float> l, const SamplingParams& p,
                                                 const std::vector<int64_t>& recent) {
  const int64_t V = static_cast<int64_t>(l.size());
  const size_t n = std::min(recent.size(), static_cast<size_t>(p.repeat_last_n));
  l = reference_penalty(l, std::vector<int64_t>(recent.end() - n, recent.end()), p.repeat_penalty);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  if (p.greedy()) return {{order[0], 1.0}};
  std::vector<double> z(V);
  for (int64_t i = 0; i < V; ++i) z[i] = static_cast<double>(l[i] / p.temperature);
  std::vector<bool> keep(V, true);
  auto softmax = [&] {
    std::vector<double> pr(V, 0.0);
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < V; ++i)
      if (keep[i]) m = std::max(m, z[i]);
    for (int64_t i = 0; i < V; ++i)
      if (keep[i]) s += pr[i] = std::exp(z[i] - m);
    for (double& v : pr) v /= s;
    return pr;
  };
  if (p.top_k > 0)
    for (int64_t r = p.top_k; r < V; ++r) keep[order[r]] = false;
  if (p.top_p < 1.f) {
    const auto pr = softmax();
    double before = 0;
    for (int32_t id : order) {
      if (!keep[id]) continue;
      if (before >= p.top_p) keep[id] = false;
      before += pr[id];
    }
  }
  if (p.min_p > 0.f) {
    const auto pr = softmax();
    const double top = pr[order[0]];
    for (int64_t i = 0; i < V; ++i)
      if (keep[i] && pr[i] < p.min_p * top) keep[i] = false;
  }
  const auto pr = softmax();
  std::map<int32_t, double> out;
  for (int64_t i = 0; i < V; ++i)
    if (keep[i]) out[static_cast<int32_t>(i)] = pr[i];
  return out;
}

void expect_same(const std::map<int32_t, double>& ref, std::span<const Candidate> got, const std::string& what) {
  std::map<int32_t, double> g;
  for (const Candidate& c : got) g[c.id] = c.prob;
  ASSERT_EQ(g.size(), ref.size()) << what;
  for (const auto& [id, pr] : ref) {
    ASSERT_TRUE(g.count(id)) << what << ": id " << id << " missing";
    EXPECT_NEAR(g[id], pr, 1e-9) << what << ": id " << id;
  }
}

TEST(Sampler, FiltersMatchTheReference) {
  const int64_t V = 700;
  // Rounded logits make ties, which both sides must break by id.
  std::vector<float> logits = testing::random_vector(V, 7, -4.f, 4.f);
  for (float& x : logits) x = std::round(x * 4.f) / 4.f;
  const std::vector<int64_t> recent = {3, 17, 17, 42, 699, 5, 3, 800, -1};
  int checked = 0;
  for (float T : {0.f, 0.6f, 1.f, 1.7f})
    for (int64_t k : {0, 1, 5, 300})
      for (float top_p : {1.f, 0.95f, 0.5f, 0.01f})
        for (float min_p : {0.f, 0.05f, 0.5f})
          for (float pen : {1.f, 1.3f}) {
            SamplingParams p{.temperature = T, .top_k = k, .top_p = top_p, .min_p = min_p,
                             .repeat_penalty = pen, .repeat_last_n = 6};
            Sampler s(V, p, 1);
            std::vector<float> l = logits;
            const auto got = s.distribution(l.data(), recent);
            expect_same(reference_distribution(logits, p, recent), got,
                        cat("T ", T, " k ", k, " p ", top_p, " min_p ", min_p, " pen ", pen));
            ++checked;
          }
  EXPECT_EQ(checked, 4 * 4 * 4 * 3 * 2);
}

TEST(Sampler, TopPOverAFlatDistributionSortsPastTheFirstPrefix) {
  // Nearly uniform: the top-p set is thousands of tokens, beyond the
  // sampler's first sorted prefix.
  const int64_t V = 5000;
  const std::vector<float> logits = testing::random_vector(V, 8, -0.01f, 0.01f);
  for (int64_t k : {0, 4000}) {
    SamplingParams p{.temperature = 1.f, .top_k = k, .top_p = 0.9f};
    Sampler s(V, p, 1);
    std::vector<float> l = logits;
    const auto got = s.distribution(l.data(), {});
    EXPECT_GT(got.size(), 3000u);
    expect_same(reference_distribution(logits, p, {}), got, cat("flat, k ", k));
  }
}

TEST(Sampler, RepetitionPenaltyFollowsHfRule) {
  const std::vector<float> logits = {2.f, -1.f, 0.5f, -3.f, 0.f, 4.f};
  const std::vector<int64_t> recent = {0, 1, 1, 3, 9, -2, 0};
  std::vector<uint8_t> seen(logits.size(), 0);
  std::vector<float> got = logits;
  apply_repetition_penalty(got.data(), static_cast<int64_t>(got.size()), recent, 2.f, seen);
  EXPECT_EQ(got, reference_penalty(logits, recent, 2.f));
  EXPECT_EQ(got, (std::vector<float>{1.f, -2.f, 0.5f, -6.f, 0.f, 4.f}));  // by hand: each id once
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](uint8_t b) { return b == 0; }));
}

TEST(Sampler, GreedyTakesTheFirstLargestAndDrawsNothing) {
  Sampler s(5, SamplingParams{}, 1);
  std::vector<float> l = {1.f, 3.f, -2.f, 3.f, 0.f};
  EXPECT_EQ(s.sample(l.data(), {}), 1);
  Sampler fresh(5, SamplingParams{}, 1);
  EXPECT_EQ(s.uniform(), fresh.uniform());  // the greedy call consumed no random numbers
}

TEST(Sampler, DrawFollowsProbabilities) {
  Sampler s(4, SamplingParams{.temperature = 1.f}, 123);
  const std::vector<Candidate> c = {{0, 0.1}, {1, 0.6}, {2, 0.0}, {3, 0.3}};
  std::vector<int> count(4, 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i) ++count[s.draw(c)];
  EXPECT_EQ(count[2], 0);
  for (int i : {0, 1, 3}) EXPECT_NEAR(count[i] / double(n), c[i].prob, 0.005) << i;
  for (int i = 0; i < 1000; ++i) {
    const double u = s.uniform();
    ASSERT_TRUE(u >= 0.0 && u < 1.0);
  }
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  const int64_t V = 300;
  const std::vector<float> logits = testing::random_vector(V, 9, -1.f, 1.f);
  auto run = [&](uint64_t seed) {
    Sampler s(V, SamplingParams{.temperature = 1.f, .top_k = 100, .top_p = 0.95f, .min_p = 0.01f,
                                .repeat_penalty = 1.1f},
              seed);
    std::vector<int64_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l = logits;
      out.push_back(s.sample(l.data(), out));
    }
    return out;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
  // The draws are ours on the standard-fixed mt19937_64 stream: the first
  // uniform of seed 5 is its first output's top 53 bits.
  Sampler s(V, SamplingParams{.temperature = 1.f}, 5);
  std::mt19937_64 rng(5);
  EXPECT_EQ(s.uniform(), static_cast<double>(rng() >> 11) * 0x1.0p-53);
}

TEST(Sampler, RejectsBadParameters) {
  for (SamplingParams p : {SamplingParams{.top_k = -1}, SamplingParams{.top_p = 0.f},
                           SamplingParams{.top_p = 1.5f}, SamplingParams{.min_p = -0.1f},
                           SamplingParams{.repeat_penalty = 0.f}, SamplingParams{.temperature = NAN}})
    EXPECT_THROW(Sampler(10, p, 0), Error);
  std::vector<float> l = {0.f, NAN};
  Sampler s(2, SamplingParams{}, 0);
  EXPECT_THROW(s.sample(l.data(), {}), Error);
}

}  // namespace
}  // namespace ssm
