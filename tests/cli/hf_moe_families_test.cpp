// The mixture-of-experts HF families (Nemotron-H with MoE layers, Jamba)
// through the program: greedy generation reproduces transformers' cached
// decode token for token, and a conversation continued from a session file
// equals one run over the whole text.
#include <gtest/gtest.h>

#include <sstream>

#include "ssm/io/safetensors.h"
#include "support/cli.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::run_ssm;

const std::vector<std::string> kMoeFamilies = {"models/nemotron_h_moe_hf", "models/jamba_hf"};

std::vector<int64_t> ids_of(const Tensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }

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

// `ssm generate` greedily from prompt ids, n new tokens, printing the ids.
testing::CliRun greedy(const std::string& model, const std::vector<int64_t>& prompt, int64_t n,
                       const std::string& session = "") {
  std::vector<std::string> a = {"generate", model, "--prompt-ids", joined(prompt), "--temperature", "0",
                                "--print-ids", "-q", "--ignore-eos", "-n", std::to_string(n)};
  if (!session.empty()) a.insert(a.end(), {"--session", session});
  return run_ssm(a);
}

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
    // One run over the first run's text, then the second prompt.
    std::vector<int64_t> whole = ids1;
    whole.insert(whole.end(), second.begin(), second.end());
    const testing::CliRun all = greedy(golden_dir(c), whole, 6);
    ASSERT_EQ(all.code, 0) << all.err;
    const std::vector<int64_t> ids_all = parse_ids(all.out);
    ASSERT_EQ(ids_all.size(), whole.size() + 6);
    EXPECT_EQ(std::vector<int64_t>(ids_all.end() - 6, ids_all.end()), std::vector<int64_t>(ids2.end() - 6, ids2.end()));
  }
}

}  // namespace
}  // namespace ssm
