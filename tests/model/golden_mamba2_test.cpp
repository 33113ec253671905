// Mamba-2 models against the reference implementations' outputs (SPEC §7).
#include <gtest/gtest.h>

#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::max_rel_error;

struct GoldenCase {
  std::string name;
  double tolerance;
};

class GoldenMamba2 : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenMamba2, LogitsAndIntermediatesMatchReference) {
  const GoldenCase& gc = GetParam();
  LanguageModel model = LanguageModel::load(golden_dir(gc.name));
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir(gc.name) + "/golden.safetensors");
  for (const auto& [backend, threads] : testing::backend_runs()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, threads);
    ForwardTrace trace;
    const Tensor logits = model.forward(golden.get("input_ids").clone(), nullptr, ctx, false, &trace);
    const double err = max_rel_error(logits, golden.get("logits"));
    RecordProperty(cat("logits_rel_error_", threads, "t"), std::to_string(err));
    EXPECT_LE(err, gc.tolerance) << threads << " threads";
    for (int64_t i = 0; i < model.n_layer(); ++i) {
      if (golden.contains(cat("mixer_in.", i))) {
        EXPECT_LE(max_rel_error(trace.mixer_in[i], golden.get(cat("mixer_in.", i))), gc.tolerance) << i;
        EXPECT_LE(max_rel_error(trace.mixer_out[i], golden.get(cat("mixer_out.", i))), gc.tolerance) << i;
      }
    }
    for (size_t i = 0; i < trace.hidden.size(); ++i) {
      const std::string key = cat("hidden_states.", i);
      if (golden.contains(key)) {
        EXPECT_LE(max_rel_error(trace.hidden[i], golden.get(key)), gc.tolerance) << key;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenMamba2,
                         ::testing::Values(GoldenCase{"mamba2_hf_tiny", 1e-4},
                                           GoldenCase{"mamba2_ssm_tiny", 5e-4}),
                         [](const auto& info) { return info.param.name; });

TEST(GoldenMamba2, PrefillOfGeneratedTextMatches) {
  LanguageModel model = LanguageModel::load(golden_dir("mamba2_hf_tiny"));
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir("mamba2_hf_tiny") + "/golden.safetensors");
  const Tensor out = golden.get("gen_output").clone();
  const Tensor prefix = out.reshape({out.numel()}).rows(0, out.numel() - 1).reshape({1, out.numel() - 1});
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    const Tensor logits = model.forward(prefix, nullptr, ctx);
    EXPECT_LE(max_rel_error(logits, golden.get("gen_logits_prefill")), 1e-4);
  }
}

}  // namespace
}  // namespace ssm
