// The downloaded-checkpoint families (every one of hf_family_cases(), in
// tests/golden/models/) on the GPU (label gpu): the logits of the golden
// sequences within the host tests' tolerance of HF transformers' (golden_hf_families_test.cpp), and
// greedy decoding steps equal to the prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "model/decode_support.h"
#include "support/backends.h"

namespace ssm {
namespace {

using testing::host;
using testing::max_rel_error;

class GpuHfFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuHfFamily, LogitsMatchTransformers) {
  Context ctx("cuda", 1);
  LanguageModel model = LanguageModel::load(testing::golden_dir(GetParam()));
  model.to_device(ctx.device());
  const SafetensorsFile golden = testing::golden_file(GetParam());
  const Tensor logits = host(model.forward(golden.get("input_ids").clone(), nullptr, ctx));
  const double err = max_rel_error(logits, golden.get("logits"));
  RecordProperty("logits_rel_error", std::to_string(err));
  EXPECT_LE(err, 1e-4);
}

TEST_P(GpuHfFamily, StepLogitsEqualPrefillLogits) {
  Context ctx("cuda", 1);
  LanguageModel model = LanguageModel::load(testing::golden_dir(GetParam()));
  model.to_device(ctx.device());
  const Tensor given = testing::golden_file(GetParam()).get("input_ids").clone();
  const int64_t B = given.dim(0), L = given.dim(1), V = model.config().vocab_size;
  const std::vector<int64_t> flat = testing::to_ids(given);
  Tensor ids = Tensor::empty(DType::kI64, {B, L});
  std::copy(flat.begin(), flat.end(), ids.data<int64_t>());
  const Tensor prefill = host(model.forward(ids, nullptr, ctx));
  ModelState state = model.make_state(B);
  Tensor stepped = Tensor::empty(DType::kF32, {B, L, V});
  std::vector<int64_t> tok(static_cast<size_t>(B));
  for (int64_t t = 0; t < L; ++t) {
    for (int64_t b = 0; b < B; ++b) tok[static_cast<size_t>(b)] = ids.data<int64_t>()[b * L + t];
    const Tensor lg = host(model.step(tok.data(), state, ctx));
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(lg.data<float>() + b * V, V, stepped.data<float>() + (b * L + t) * V);
  }
  EXPECT_LE(max_rel_error(stepped, prefill), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Families, GpuHfFamily, ::testing::ValuesIn(testing::hf_family_cases()),
                         testing::golden_case_name);

}  // namespace
}  // namespace ssm
