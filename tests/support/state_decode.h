// The decode runs the state-dtype tests compare (tests/model/bf16_state_test.cpp
// on the host backends, tests/gpu/bf16_state_cuda_test.cpp on cuda): two
// sequences prompted alike, stepped with tokens that are a function of the
// step's index, and the distance between two runs' logits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ssm/model/language_model.h"
#include "support/backends.h"

namespace ssm::testing {

inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = host(a).clone(), y = host(b).clone();
  return x.same_layout(y) && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

// The host (2, vocab) logits of steps [first, first + steps), the same
// tokens in every run.
inline std::vector<Tensor> decode(LanguageModel& model, Context& ctx, int steps, ModelState& state,
                                  int first = 0) {
  std::vector<Tensor> out;
  for (int i = first; i < first + steps; ++i) {
    const int64_t tok[2] = {(i * 7 + 3) % 200, (i * 13 + 11) % 200};
    out.push_back(host(model.step(tok, state, ctx)).clone());
  }
  return out;
}

inline Tensor prompt_ids(int64_t L) {
  Tensor ids = Tensor::empty(DType::kI64, {2, L});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 37 + 1) % 200;
  return ids;
}

// Two sequences after the same 8-token prompt.
inline ModelState prompted(LanguageModel& model, Context& ctx) {
  ModelState state = model.make_state(2);
  model.forward(prompt_ids(8), &state, ctx, /*last_only=*/true);
  return state;
}

// max |a - b| over max |b|, over every step's logits.
inline double drift(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double diff = 0, scale = 0;
  for (size_t s = 0; s < a.size(); ++s) {
    const Tensor x = a[s].to_f32(), y = b[s].to_f32();
    for (int64_t i = 0; i < x.numel(); ++i) {
      diff = std::max(diff, std::abs(double{x.data<float>()[i]} - y.data<float>()[i]));
      scale = std::max(scale, std::abs(double{y.data<float>()[i]}));
    }
  }
  return diff / scale;
}

}  // namespace ssm::testing
