// Shared helpers for tests: golden paths and the normalised error measure of
// SPEC §7 (max |ours - ref| / max |ref|).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "ssm/tensor/tensor.h"

namespace ssm::testing {

inline std::string golden_dir(const std::string& name) { return std::string(SSM_GOLDEN_DIR) + "/" + name; }

inline double max_rel_error(const float* ours, const float* ref, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(ours[i]) - ref[i]));
    scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

inline double max_rel_error(const Tensor& ours, const Tensor& ref) {
  if (ours.numel() != ref.numel()) return INFINITY;
  const Tensor a = ours.to_f32(), b = ref.to_f32();
  return max_rel_error(a.data<float>(), b.data<float>(), a.numel());
}

}  // namespace ssm::testing
