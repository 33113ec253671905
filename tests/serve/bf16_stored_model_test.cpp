// A model stored in BF16 (`ssm convert --dtype bf16` of the built-in one)
// does what an F32 one does: it generates what the F32 model loaded with
// --dtype bf16 generates (the same rounding), serves a session as one
// generation over its whole text, continues a saved session file, and
// trains (a WSLA fine-tune, stopped and resumed) exactly as its F32 widening
// does, since training widens BF16 weights to F32 master weights.
#include <gtest/gtest.h>

#include "serve/serve_helpers.h"

namespace ssm::testing {
namespace {

class Bf16StoredModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const CliRun r = run_ssm({"convert", default_model(), bf16(), "--dtype", "bf16"});
    ASSERT_EQ(r.code, 0) << r.err;
    // The BF16 values widened back to F32: what training the BF16 copy must equal.
    const CliRun w = run_ssm({"convert", bf16(), widened(), "--dtype", "f32"});
    ASSERT_EQ(w.code, 0) << w.err;
    std::string text;
    for (int i = 0; i < 40; ++i) text += "Blessed are the meek: for they shall inherit the earth. ";
    write_bytes(*dir_ / "data.txt", text);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string bf16() { return (*dir_ / "bf16").string(); }
  static std::string widened() { return (*dir_ / "widened").string(); }
  static std::string data() { return (*dir_ / "data.txt").string(); }
  static TempDir* dir_;
};
TempDir* Bf16StoredModel::dir_ = nullptr;

std::vector<std::string> greedy(const std::string& model, const std::vector<int64_t>& prompt, int n) {
  return {"generate", model, "--prompt-ids", join_ids(prompt), "--print-ids", "--temperature", "0",
          "--max-tokens", std::to_string(n), "--threads", "1", "-q"};
}

TEST_F(Bf16StoredModel, GeneratesAsTheF32ModelLoadedInBf16) {
  const std::vector<int64_t> prompt = {65, 110, 100, 32, 105, 116};
  std::vector<std::string> f32_as_bf16 = greedy(default_model(), prompt, 16);
  f32_as_bf16.insert(f32_as_bf16.end(), {"--dtype", "bf16"});
  const CliRun expected = run_ssm(f32_as_bf16);
  ASSERT_EQ(expected.code, 0) << expected.err;
  const CliRun stored = run_ssm(greedy(bf16(), prompt, 16));
  ASSERT_EQ(stored.code, 0) << stored.err;
  EXPECT_EQ(stored.out, expected.out);
}

TEST_F(Bf16StoredModel, ServesAndContinuesSessions) {
  const std::vector<std::vector<int64_t>> turns = {{65, 110, 100, 32}, {3, 17, 42}, {84, 104, 101}};
  TempDir dir;
  std::vector<std::vector<int64_t>> served;
  {
    ServeProcess server(bf16(), dir / "sessions");
    auto c = server.client();
    for (const auto& t : turns) {
      const Reply r =
          post(*c, "/v1/completions", json{{"prompt", t}, {"max_tokens", 6}, {"temperature", 0}, {"session", "s"}});
      ASSERT_EQ(r.status, 200) << r.raw;
      served.push_back(completion_ids(r));
    }
    EXPECT_EQ(server.stop().code, 0);
  }
  // The session is one generation over the whole text.
  std::vector<int64_t> all = turns[0];
  for (size_t i = 1; i < turns.size(); ++i) {
    all.insert(all.end(), served[i - 1].begin(), served[i - 1].end());
    all.insert(all.end(), turns[i].begin(), turns[i].end());
    EXPECT_EQ(generate_greedy(bf16(), all, 6), served[i]) << "request " << i;
  }
  // A session file written and continued by `ssm generate` holds what the
  // server's does.
  const std::string state = (dir / "cli.state").string();
  for (const auto& t : turns) {
    std::vector<std::string> args = greedy(bf16(), t, 6);
    args.insert(args.end(), {"--session", state});
    ASSERT_EQ(run_ssm(args).code, 0);
  }
  EXPECT_TRUE(slurp_file(dir / "sessions" / "s.state") == slurp_file(state));
}

// `ssm train` of the BF16 copy and of its F32 widening, trained the same
// way; the BF16 run stopped after step 2 and resumed.
TEST_F(Bf16StoredModel, WslaFineTuneAndResumeTrainAsItsF32Widening) {
  TempDir dir;
  const auto train = [&](const std::string& model, const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"train",  model, "--data",   data(), "--out",    out,   "--wsla",
                                     "--steps", "3",  "--batch",  "2",    "--seq-len", "32", "--warmup",
                                     "0",       "--lr", "2e-3",   "--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 0) << r.err;
  };
  const std::string from_bf16 = (dir / "from_bf16").string(), from_f32 = (dir / "from_f32").string();
  train(bf16(), from_bf16, {"--stop-at", "2"});
  train(bf16(), from_bf16, {"--resume"});
  train(widened(), from_f32, {});
  const std::string trained = slurp_file(dir / "from_f32" / "model.safetensors");
  ASSERT_FALSE(trained.empty());
  EXPECT_TRUE(slurp_file(dir / "from_bf16" / "model.safetensors") == trained);
  EXPECT_FALSE(slurp_file(std::filesystem::path(widened()) / "model.safetensors") == trained);  // it trained
}

}  // namespace
}  // namespace ssm::testing
