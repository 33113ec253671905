// The downloaded-checkpoint families (tests/golden/models/) against HF
// transformers' fp32 outputs: logits of two sequences and of one prefill
// over the reference's greedy generation, on every backend. Decoding,
// split prefill, sessions and greedy generation of the same cases are in
// decode_golden_test.cpp.
#include <gtest/gtest.h>

#include "decode_support.h"
#include "support/backends.h"

namespace ssm {
namespace {

using testing::golden_file;
using testing::max_rel_error;

class GoldenHfFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenHfFamily, LogitsMatchTransformers) {
  LanguageModel model = LanguageModel::load(testing::golden_dir(GetParam()));
  const SafetensorsFile golden = golden_file(GetParam());
  for (const auto& [backend, threads] : testing::backend_runs()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, threads);
    const Tensor logits = model.forward(golden.get("input_ids").clone(), nullptr, ctx);
    const double err = max_rel_error(logits, golden.get("logits"));
    RecordProperty(cat("logits_rel_error_", backend, "_", threads, "t"), cat(err));
    EXPECT_LE(err, 1e-4) << threads << " threads";
  }
}

TEST_P(GoldenHfFamily, PrefillOfGeneratedTextMatchesTransformers) {
  LanguageModel model = LanguageModel::load(testing::golden_dir(GetParam()));
  const SafetensorsFile golden = golden_file(GetParam());
  const Tensor out = golden.get("gen_output").clone();
  const int64_t n = out.numel();
  const Tensor prefix = out.reshape({n}).rows(0, n - 1).reshape({1, n - 1});
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    const Tensor logits = model.forward(prefix, nullptr, ctx);
    EXPECT_LE(max_rel_error(logits, golden.get("gen_logits_prefill")), 1e-4);
  }
}

TEST_P(GoldenHfFamily, ConfigNamesTheFamily) {
  const ModelConfig c = load_model_config(testing::golden_dir(GetParam()) + "/config.json");
  const Json j = load_json_file(testing::golden_dir(GetParam()) + "/config.json");
  EXPECT_EQ(c.family, j["model_type"].get<std::string>());
  EXPECT_EQ(c.convention, Convention::kHuggingFace);
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenHfFamily, ::testing::ValuesIn(testing::hf_family_cases()),
                         testing::golden_case_name);

}  // namespace
}  // namespace ssm
