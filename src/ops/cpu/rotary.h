// The rotary turns of Mamba-3's q and k (SPEC §4), vectorised (Highway,
// chosen at run time for the CPU). The scalar loop of one std::cos and one
// std::sin per angle, step and head was most of mamba3_prepare's time: a
// 130m model turns 32 angles per head for 24 heads of every token.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// c[i] = cos(x[i]) and s[i] = sin(x[i]) for i < n. Highway's Cos and Sin are
// within a few ULP for |x| <= 39000; lanes past that go through std::cos and
// std::sin. Each value depends only on x[i], not on where it sits in its run.
void sin_cos(const float* x, float* c, float* s, int64_t n);

// Rows of q or k before and after the turn: row r is x + r * ldx plus
// bias + r * N, written to out + r * N.
struct TurnRows {
  const float* x;
  int64_t ldx;
  const float* bias;
  float* out;
};

// For `rows` rows of q and as many of k (N entries each): out = x + bias,
// then the pair (e0, e1) of each of the S angles in `phase` becomes
// (a c - b s, a s + b c) for (a, b) the pair's values, c = cos(phase[j]),
// s = sin(phase[j]); e0 = 2 j, e1 = 2 j + 1 when `adjacent`, else e0 = j,
// e1 = j + N / 2. S <= N / 2. One pass over each row; the cosines and sines
// are those of sin_cos.
void biased_turn(const TurnRows& q, const TurnRows& k, int64_t rows, int64_t N, const float* phase,
                 int64_t S, bool adjacent);

}  // namespace ssm::cpu
