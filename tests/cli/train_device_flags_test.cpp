// The GPU training flags of `ssm train` on a build or backend without
// them: --bf16 on the host is a usage error before anything is written;
// --recompute (the backward recomputing each block's internals instead of
// keeping them) changes nothing on the host.
#include <gtest/gtest.h>

#include "support/cli.h"
#include "support/compare.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_ssm;

class TrainDeviceFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_bytes(dir_ / "config.json", R"({"d_model": 32, "n_layer": 1, "vocab_size": 256,
      "pad_vocab_size_multiple": 8, "d_intermediate": 0, "attn_layer_idx": [], "attn_cfg": {},
      "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "chunk_size": 16}, "tie_embeddings": true})");
    std::string text;
    for (int i = 0; i < 200; ++i)
      text += "line " + std::to_string(i % 37) + ": the quick brown fox.\n";
    testing::write_bytes(dir_ / "data.txt", text);
    ASSERT_EQ(run_ssm({"init", "--config", path("config.json"), "--out", path("base")}).code, 0);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> train(const std::string& out, std::vector<std::string> more) const {
    std::vector<std::string> args = {"train",         path("base"), "--data",    path("data.txt"),
                                     "--out",         path(out),    "--steps",   "2",
                                     "--batch",       "2",          "--seq-len", "16",
                                     "--warmup",      "1",          "--threads", "1",
                                     "--eval-tokens", "64"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  testing::TempDir dir_;
};

TEST_F(TrainDeviceFlags, Bf16OnTheHostIsRefusedBeforeAnythingIsWritten) {
  const testing::CliRun r = run_ssm(train("out", {"--bf16"}));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "ssm: error: --bf16")) << r.err;
  EXPECT_TRUE(contains(r.err, "--backend cuda")) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(TrainDeviceFlags, RecomputeChangesNothingOnTheHost) {
  const testing::CliRun plain = run_ssm(train("a", {}));
  const testing::CliRun recomputed = run_ssm(train("b", {"--recompute"}));
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(recomputed.code, 0) << recomputed.err;
  EXPECT_EQ(testing::slurp_file(dir_ / "a/model.safetensors"),
            testing::slurp_file(dir_ / "b/model.safetensors"));
}

}  // namespace
}  // namespace ssm
