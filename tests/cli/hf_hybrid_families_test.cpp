// Falcon-H1 (attention beside Mamba-2 in every layer) and Zamba2 (a shared
// attention block reused at several depths) through the program: greedy
// generation reproduces transformers' where its cached decode agreed with its
// own prefill, and a conversation continued from a session file (every
// layer's SSM and conv state plus every KV cache) equals one run over the
// whole text.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "ssm/io/safetensors.h"
#include "support/cli.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::run_ssm;

const std::vector<std::string> kFamilies = {"models/falcon_h1_hf", "models/zamba2_hf"};

std::vector<int64_t> ids_of(const Tensor& t) {
  return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
}

std::string joined(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += cat(s.empty() ? "" : ",", id);
  return s;
}

std::vector<int64_t> parse_ids(const std::string& line) {
  std::vector<int64_t> out;
  std::stringstream in(line);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

testing::CliRun greedy(const std::string& model, const std::vector<int64_t>& prompt, int64_t n,
                       const std::string& session = "") {
  std::vector<std::string> a = {"generate",      model, "--prompt-ids",   joined(prompt),
                                "--temperature", "0",   "--print-ids",    "-q",
                                "--ignore-eos",  "-n",  std::to_string(n)};
  if (!session.empty()) a.insert(a.end(), {"--session", session});
  return run_ssm(a);
}

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
    testing::TempDir dir;
    const std::string session = (dir / "chat.state").string();
    const std::vector<int64_t> first = {5, 17, 200, 3, 99}, second = {42, 7, 130};
    const testing::CliRun r1 = greedy(golden_dir(c), first, 6, session);
    ASSERT_EQ(r1.code, 0) << r1.err;
    const std::vector<int64_t> ids1 = parse_ids(r1.out);
    ASSERT_EQ(ids1.size(), first.size() + 6);
    const testing::CliRun r2 = greedy(golden_dir(c), second, 6, session);
    ASSERT_EQ(r2.code, 0) << r2.err;
    const std::vector<int64_t> ids2 = parse_ids(r2.out);
    ASSERT_EQ(ids2.size(), second.size() + 6);
    std::vector<int64_t> whole = ids1;
    whole.insert(whole.end(), second.begin(), second.end());
    const testing::CliRun all = greedy(golden_dir(c), whole, 6);
    ASSERT_EQ(all.code, 0) << all.err;
    const std::vector<int64_t> ids_all = parse_ids(all.out);
    ASSERT_EQ(ids_all.size(), whole.size() + 6);
    EXPECT_EQ(std::vector<int64_t>(ids_all.end() - 6, ids_all.end()),
              std::vector<int64_t>(ids2.end() - 6, ids2.end()));
  }
}

}  // namespace
}  // namespace ssm
