// The SSD backward's vectorised pair terms (ops/cpu/ssd_pair_terms.h)
// against the scalar loops they replaced, written out here in double, over
// chunk lengths that end on and off the vector width and rows with padding
// (whose values must be left alone).
#include "ops/cpu/ssd_pair_terms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ssm {
namespace {

struct PairProblem {
  int64_t q, ld;
  std::vector<float> sc, cs, dt, dM;
  std::vector<double> cs_d;
};

PairProblem make_problem(int64_t q, uint32_t seed) {
  PairProblem p{.q = q, .ld = q + 3};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.f, 1.f), pos(0.01f, 0.3f);
  p.sc.resize(q * p.ld);
  p.dM.resize(q * p.ld);
  for (float& v : p.sc) v = unit(rng);
  for (float& v : p.dM) v = unit(rng);
  float run = 0.f;
  for (int64_t t = 0; t < q; ++t) {
    p.dt.push_back(pos(rng));
    run += p.dt.back() * -1.7f;  // cs = cumsum(dt A), A < 0
    p.cs.push_back(run);
    p.cs_d.push_back(run);
  }
  return p;
}

class SsdPairTerms : public ::testing::TestWithParam<int64_t> {};

TEST_P(SsdPairTerms, DecayScoresMatchDouble) {
  const PairProblem p = make_problem(GetParam(), 1);
  const int64_t q = p.q, ld = p.ld;
  std::vector<float> M(q * ld, 7.f);  // 7: padding that must stay
  cpu::ssd_decay_scores(p.sc.data(), ld, p.cs.data(), p.dt.data(), q, M.data(), ld);
  for (int64_t t = 0; t < q; ++t) {
    for (int64_t s = 0; s < q; ++s) {
      const double want = s <= t ? p.sc[t * ld + s] * std::exp(static_cast<double>(p.cs[t]) - p.cs[s]) *
                                       p.dt[s]
                                 : 0.0;
      // cs[t] - cs[s] is taken in float, as the scalar loop did: up to an
      // ulp of a difference of ~30 off, a few 1e-6 relative in the exponential.
      EXPECT_NEAR(M[t * ld + s], want, 5e-6 * std::abs(want) + 1e-12) << t << ", " << s;
    }
    for (int64_t s = q; s < ld; ++s) EXPECT_EQ(M[t * ld + s], 7.f);
  }
}

TEST_P(SsdPairTerms, DecayScoresBackwardMatchesDouble) {
  const PairProblem p = make_problem(GetParam(), 2);
  const int64_t q = p.q, ld = p.ld;
  std::vector<float> M(q * ld, 0.f);
  cpu::ssd_decay_scores(p.sc.data(), ld, p.cs.data(), p.dt.data(), q, M.data(), ld);
  // Start from nonzero accumulators: the kernel adds to them.
  std::vector<double> dcs(q), ddt(q);
  std::vector<float> dcb(q * ld);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  for (int64_t i = 0; i < q; ++i) dcs[i] = unit(rng), ddt[i] = unit(rng);
  for (float& v : dcb) v = unit(rng);
  std::vector<double> want_dcs = dcs, want_ddt = ddt;
  std::vector<double> want_dcb(dcb.begin(), dcb.end());
  for (int64_t t = 0; t < q; ++t)
    for (int64_t s = 0; s <= t; ++s) {
      const double dm = p.dM[t * ld + s];
      const double e = std::exp(p.cs_d[t] - p.cs_d[s]);
      const double val = dm * M[t * ld + s];
      want_dcs[t] += val;
      want_dcs[s] -= val;
      want_ddt[s] += dm * p.sc[t * ld + s] * e;
      want_dcb[t * ld + s] += dm * e * p.dt[s];
    }
  const std::vector<float> dcb_before = dcb;
  cpu::ssd_decay_scores_backward(p.dM.data(), M.data(), ld, p.sc.data(), ld, p.cs_d.data(),
                                 p.dt.data(), q, dcs.data(), ddt.data(), dcb.data(), ld);
  for (int64_t i = 0; i < q; ++i) {
    EXPECT_NEAR(dcs[i], want_dcs[i], 1e-9 * (1 + std::abs(want_dcs[i]))) << i;
    EXPECT_NEAR(ddt[i], want_ddt[i], 1e-9 * (1 + std::abs(want_ddt[i]))) << i;
  }
  for (int64_t t = 0; t < q; ++t)
    for (int64_t s = 0; s < ld; ++s) {
      if (s > t) {  // above the diagonal and the padding: untouched
        EXPECT_EQ(dcb[t * ld + s], dcb_before[t * ld + s]) << t << ", " << s;
        continue;
      }
      EXPECT_NEAR(dcb[t * ld + s], want_dcb[t * ld + s], 2e-7 * (1 + std::abs(want_dcb[t * ld + s])))
          << t << ", " << s;
    }
}

INSTANTIATE_TEST_SUITE_P(ChunkLengths, SsdPairTerms, ::testing::Values(1, 5, 8, 16, 17, 64, 100));

}  // namespace
}  // namespace ssm
