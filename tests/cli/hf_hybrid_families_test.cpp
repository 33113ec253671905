// Falcon-H1 (attention beside Mamba-2 in every layer) and Zamba2 (a shared
// attention block reused at several depths) through the program: greedy
// generation reproduces transformers' where its cached decode agreed with its
// own prefill, and a conversation continued from a session file (every
// layer's SSM and conv state plus every KV cache) equals one run over the
// whole text.
#include <gtest/gtest.h>

#include <algorithm>

#include "ssm/io/safetensors.h"
#include "support/compare.h"
#include "support/greedy_cli.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::greedy;
using testing::ids_of;
using testing::joined;

const std::vector<std::string> kFamilies = {"models/falcon_h1_hf", "models/zamba2_hf"};

// HF's greedy tokens up to the first one that is not the argmax of its own
// prefill over the generated text, that one replaced by the argmax (see
// tests/model/decode_golden_test.cpp and zamba2_hf/notes.json).
std::vector<int64_t> trusted_generation(const SafetensorsFile& golden, size_t prompt_len) {
  std::vector<int64_t> out = ids_of(golden.get("gen_output"));
  const Tensor logits = golden.get("gen_logits_prefill").to_f32();
  const int64_t V = logits.dim(2);
  for (size_t t = prompt_len; t < out.size(); ++t) {
    const float* row = logits.data<float>() + static_cast<int64_t>(t - 1) * V;
    const int64_t best = std::max_element(row, row + V) - row;
    if (best != out[t]) {
      out.resize(t);
      out.push_back(best);
      break;
    }
  }
  return out;
}

TEST(HfHybridFamiliesCli, GreedyGenerationReproducesTransformersWhereItsDecodeWasRight) {
  for (const std::string& c : kFamilies) {
    SCOPED_TRACE(c);
    const SafetensorsFile golden = SafetensorsFile::open(golden_dir(c) + "/golden.safetensors");
    const std::vector<int64_t> prompt = ids_of(golden.get("gen_prompt"));
    const std::vector<int64_t> expected = trusted_generation(golden, prompt.size());
    const testing::CliRun r =
        greedy(golden_dir(c), prompt, static_cast<int64_t>(expected.size() - prompt.size()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, joined(expected) + "\n");
  }
}

TEST(HfHybridFamiliesCli, SessionContinuedEqualsOneRunOverTheWholeText) {
  for (const std::string& c : kFamilies) {
    SCOPED_TRACE(c);
    testing::expect_session_equals_one_run(golden_dir(c));
  }
}

}  // namespace
}  // namespace ssm
