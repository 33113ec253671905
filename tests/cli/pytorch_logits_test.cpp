// Published-format checkpoints (pytorch_model.bin) run end to end: through
// LanguageModel::load and through `ssm logits`, they give the golden logits
// of their safetensors twins (SPEC §7 tolerance for state-spaces models).
#include <gtest/gtest.h>

#include "ssm/ops/backend.h"

#include "io/pytorch_fixtures.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::max_rel_error;
using testing::shell_quoted;

constexpr double kTolerance = 5e-4;

struct Twins {
  std::string bin, safetensors;
};

class PyTorchLogits : public ::testing::TestWithParam<Twins> {};

TEST_P(PyTorchLogits, LanguageModelMatchesGoldenAndTwin) {
  const Twins& t = GetParam();
  LanguageModel model = LanguageModel::load(golden_dir(t.bin));
  LanguageModel twin = LanguageModel::load(golden_dir(t.safetensors));
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir(t.bin) + "/golden.safetensors");
  const Tensor ids = golden.get("input_ids").clone();
  Context ctx(2);
  const Tensor logits = model.forward(ids, nullptr, ctx);
  const double err = max_rel_error(logits, golden.get("logits"));
  RecordProperty("logits_rel_error", std::to_string(err));
  EXPECT_LE(err, kTolerance);
  EXPECT_LE(max_rel_error(logits, twin.forward(ids, nullptr, ctx)), kTolerance);
}

TEST_P(PyTorchLogits, CliLogitsMatchGolden) {
  const Twins& t = GetParam();
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir(t.bin) + "/golden.safetensors");
  testing::TempDir tmp;
  save_safetensors(tmp / "in.safetensors", {{"input_ids", golden.get("input_ids").clone()}});
  for (const std::string& backend : testing::all_backends()) {  // host backends: GPU runs are labelled gpu
    std::string out;
    ASSERT_EQ(testing::run_cli("logits " + shell_quoted(golden_dir(t.bin)) + " --input " +
                                   shell_quoted(tmp / "in.safetensors") + " --output " +
                                   shell_quoted(tmp / "out.safetensors") + " --threads 2 --backend " +
                                   backend,
                               &out),
              0)
        << backend << ": " << out;
    const SafetensorsFile result = SafetensorsFile::open(tmp / "out.safetensors");
    EXPECT_LE(max_rel_error(result.get("logits"), golden.get("logits")), kTolerance) << backend;
  }
}

INSTANTIATE_TEST_SUITE_P(Mamba2, PyTorchLogits,
                         ::testing::Values(Twins{"mamba2_ssm_bin", "mamba2_ssm_tiny"}));
INSTANTIATE_TEST_SUITE_P(Mamba3, PyTorchLogits,
                         ::testing::Values(Twins{"mamba3_siso_bin", "mamba3_siso_tiny"}));

}  // namespace
}  // namespace ssm
