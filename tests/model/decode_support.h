// Helpers shared by the decoding tests: golden models, id tensors and logit
// comparisons.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "support/compare.h"

namespace ssm::testing {

// Every golden case with weights in safetensors (the *_bin copies are the
// same models).
// The downloaded-checkpoint families this build runs, from
// tests/golden/models/ (HF transformers' tiny models of each class).
inline const std::vector<std::string>& hf_family_cases() {
  static const std::vector<std::string> cases = {"models/mamba1_hf", "models/falcon_mamba_hf",
                                                 "models/bamba_hf", "models/nemotron_h_hf",
                                                 "models/granite_hybrid_hf",
                                            "models/nemotron_h_moe_hf", "models/jamba_hf",
                                                 "models/falcon_h1_hf", "models/zamba2_hf"};
  return cases;
}

inline const std::vector<std::string>& golden_model_cases() {
  static const std::vector<std::string> cases = [] {
    std::vector<std::string> c = {"mamba2_hf_tiny", "mamba2_ssm_tiny", "mamba3_siso_tiny",
                                  "mamba3_mimo_tiny", "hybrid_tiny"};
    c.insert(c.end(), hf_family_cases().begin(), hf_family_cases().end());
    return c;
  }();
  return cases;
}

// gtest's name for a golden case: "models/mamba1_hf" -> "models_mamba1_hf".
inline std::string golden_case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& ch : name)
    if (ch == '/') ch = '_';
  return name;
}

// The model of a golden case, or nullopt with the reason when this build
// cannot run it yet (a mixer kind still being written).
inline std::optional<LanguageModel> try_load_golden(const std::string& name, std::string& why) {
  try {
    return LanguageModel::load(golden_dir(name));
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

#define SSM_LOAD_GOLDEN_OR_SKIP(var, name)                              \
  std::string var##_why;                                                \
  std::optional<LanguageModel> var##_opt = testing::try_load_golden(name, var##_why); \
  if (!var##_opt) GTEST_SKIP() << name << ": " << var##_why;            \
  LanguageModel& var = *var##_opt

inline SafetensorsFile golden_file(const std::string& name) {
  return SafetensorsFile::open(golden_dir(name) + "/golden.safetensors");
}

inline std::vector<int64_t> to_ids(const Tensor& t) {
  const Tensor c = t.clone();
  if (c.dtype() == DType::kI32) return std::vector<int64_t>(c.data<int32_t>(), c.data<int32_t>() + c.numel());
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}

inline Tensor ids_tensor(const std::vector<int64_t>& ids, int64_t rows) {
  Tensor t = Tensor::empty(DType::kI64, {rows, static_cast<int64_t>(ids.size()) / rows});
  std::copy(ids.begin(), ids.end(), t.data<int64_t>());
  return t;
}

// Columns [t0, t1) of a (B, L, ...) id or logit tensor, as a new tensor.
inline Tensor time_slice(const Tensor& x, int64_t t0, int64_t t1) {
  const int64_t B = x.dim(0), L = x.dim(1), row = x.numel() / (B * L);
  Shape shape = x.shape();
  shape[1] = t1 - t0;
  Tensor out = Tensor::empty(x.dtype(), shape);
  const size_t es = dtype_size(x.dtype());
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(static_cast<char*>(out.raw()) + b * (t1 - t0) * row * es,
                static_cast<const char*>(x.raw()) + (b * L + t0) * row * es, (t1 - t0) * row * es);
  return out;
}

}  // namespace ssm::testing
