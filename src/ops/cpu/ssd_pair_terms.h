// The per-pair terms of a chunk of the SSD backward (ssd_scan_backward.cpp)
// as Highway passes, chosen at run time for the CPU: q(q+1)/2 exponentials
// per chunk and head, which as scalar std::exp calls were a large part of
// the backward. Rows are taken a vector at a time; lanes past the diagonal
// are computed and then masked (a short tail goes through a full vector), so
// every pair gets the same lane-wise arithmetic wherever it sits.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// M[t][s] = sc[t][s] exp(cs[t] - cs[s]) dt[s] for s <= t, 0 for s > t
// (t, s < q; rows of M ldm floats apart, of sc ldsc). cs is non-increasing
// (a cumulative sum of dt A <= 0), so every exponent is <= 0.
void ssd_decay_scores(const float* sc, int64_t ldsc, const float* cs, const float* dt, int64_t q,
                      float* M, int64_t ldm);

// The gradient through M above, given dM (rows ldm apart) and M itself, for
// s <= t, with e = exp(cs[t] - cs[s]) and v = dM[t][s] M[t][s], in double:
//   dcs[t] += v,  dcs[s] -= v,  ddt[s] += dM[t][s] sc[t][s] e,
//   dcb[t][s] += float(dM[t][s] e dt[s])   (rows of dcb lddcb floats apart).
void ssd_decay_scores_backward(const float* dM, const float* M, int64_t ldm, const float* sc,
                               int64_t ldsc, const double* cs, const float* dt, int64_t q,
                               double* dcs, double* ddt, float* dcb, int64_t lddcb);

}  // namespace ssm::cpu
