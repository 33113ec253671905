// The mixture-of-experts HF families (Nemotron-H with MoE layers, Jamba)
// through the program: greedy generation reproduces transformers' cached
// decode token for token, and a conversation continued from a session file
// equals one run over the whole text.
#include <gtest/gtest.h>

#include "ssm/io/safetensors.h"
#include "support/compare.h"
#include "support/greedy_cli.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::greedy;
using testing::ids_of;
using testing::joined;

const std::vector<std::string> kMoeFamilies = {"models/nemotron_h_moe_hf", "models/jamba_hf"};

TEST(HfMoeFamiliesCli, GreedyGenerationReproducesTransformers) {
  for (const std::string& c : kMoeFamilies) {
    SCOPED_TRACE(c);
    const SafetensorsFile golden = SafetensorsFile::open(golden_dir(c) + "/golden.safetensors");
    const std::vector<int64_t> prompt = ids_of(golden.get("gen_prompt")), out = ids_of(golden.get("gen_output"));
    const testing::CliRun r = greedy(golden_dir(c), prompt, static_cast<int64_t>(out.size() - prompt.size()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, joined(out) + "\n");
  }
}

TEST(HfMoeFamiliesCli, SessionContinuedEqualsOneRunOverTheWholeText) {
  for (const std::string& c : kMoeFamilies) {
    SCOPED_TRACE(c);
    testing::expect_session_equals_one_run(golden_dir(c));
  }
}

}  // namespace
}  // namespace ssm
