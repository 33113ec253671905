// ssm init --dtype and --shard-size: a BF16 model in several shards
// generates what the F32 model of the same seed generates with --dtype bf16;
// bad values are usage errors naming the flag; Ctrl-C leaves no model.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "support/cli.h"
#include "support/dir_listing.h"
#include "support/mamba1_config.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_ssm;

const std::string kConfig = testing::mamba1_hf_config({.hidden = 128, .layers = 4, .vocab = 1024});

TEST(CliInitDtype, ShardedBf16GeneratesAsF32ConvertedAtLoad) {
  testing::TempDir tmp;
  const std::string config = (tmp / "config.json").string();
  testing::write_bytes(config, kConfig);
  const std::string f32 = (tmp / "f32").string(), bf16 = (tmp / "bf16").string();
  ASSERT_EQ(run_ssm({"init", "--config", config, "--out", f32, "--seed", "5"}).code, 0);
  const testing::CliRun made = run_ssm({"init", "--config", config, "--out", bf16, "--seed", "5",
                                        "--dtype", "bf16", "--shard-size", "256K"});
  ASSERT_EQ(made.code, 0) << made.err;
  const std::vector<std::string> files = testing::file_names(bf16);
  EXPECT_TRUE(std::count(files.begin(), files.end(), "model.safetensors.index.json")) << made.out;
  // 1.2 MB of weights in 256 KB shards: the embedding (1024 x 128) fills one.
  const auto is_shard = [](const std::string& f) { return f.rfind("model-0000", 0) == 0; };
  EXPECT_GE(std::count_if(files.begin(), files.end(), is_shard), 4) << made.out;
  EXPECT_FALSE(std::count(files.begin(), files.end(), "model.safetensors"));
  const std::vector<std::string> gen = {"generate",    "--prompt-ids", "3,17,42,9", "-n",
                                        "12",          "--temp",       "0",         "--ignore-eos",
                                        "--print-ids", "-q",           "--dtype",   "bf16"};
  auto with = [&](const std::string& model) {
    std::vector<std::string> a = gen;
    a.push_back(model);
    return a;
  };
  const testing::CliRun a = run_ssm(with(bf16)), b = run_ssm(with(f32));
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_GT(std::count(a.out.begin(), a.out.end(), ','), 12);
}

TEST(CliInitDtype, BadValuesAreUsageErrorsNamingTheFlag) {
  testing::TempDir tmp;
  const std::string config = (tmp / "config.json").string();
  testing::write_bytes(config, kConfig);
  const std::string out = (tmp / "m").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--shard-size", "0"}, "--shard-size"},
      {{"--shard-size", "-1"}, "--shard-size"},
      {{"--shard-size", "99999999999T"}, "--shard-size"},
      {{"--shard-size", "two"}, "--shard-size"},
      {{"--shard-size", ""}, "--shard-size"},
      {{"--shard-size", "1.5.2G"}, "--shard-size"},
      {{"--dtype", "int8"}, "--dtype"},
      {{"--dtype", "q8"}, "--dtype"},
      {{"--dtype", "F32"}, "--dtype"},
      {{"--dtype", ""}, "--dtype"},
  };
  for (const auto& [flag, name] : cases) {
    std::vector<std::string> args = {"init", "--config", config, "--out", out};
    args.insert(args.end(), flag.begin(), flag.end());
    const testing::CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 2) << flag[0] << " '" << flag[1] << "'\n" << r.err;
    EXPECT_TRUE(contains(r.err, "ssm: error: " + name)) << flag[0] << " '" << flag[1] << "'\n"
                                                        << r.err;
    EXPECT_FALSE(fs::exists(out)) << flag[0] << " '" << flag[1] << "'";
  }
}

// Ctrl-C while the weights are written: exit 130 and the directory holds
// nothing (no config.json, no shard, no temp file). A machine fast enough to
// finish first leaves a whole model instead.
TEST(CliInitDtype, InterruptLeavesNoPartialModel) {
  testing::TempDir tmp;
  const std::string config = (tmp / "config.json").string();
  testing::write_bytes(config,
                       R"({"d_model": 512, "n_layer": 24, "vocab_size": 8192,
                           "ssm_cfg": {"layer": "Mamba2", "d_state": 64, "headdim": 64}})");
  const fs::path out = tmp / "m";
  fs::create_directories(out);
  testing::CliProcess p({"init", "--config", config, "--out", out.string(), "--shard-size", "64M"});
  // Wait until the first temp file exists, then interrupt.
  for (int i = 0; i < 3000 && testing::file_names(out).empty() && !p.exited(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  p.signal(SIGINT);
  const testing::CliRun r = p.wait();
  if (r.code == 0) {
    EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
    GTEST_SKIP() << "init finished before the interrupt";
  }
  EXPECT_EQ(r.code, 130) << r.err;
  EXPECT_TRUE(contains(r.err, "interrupted")) << r.err;
  EXPECT_EQ(testing::file_names(out), std::vector<std::string>{});
}

}  // namespace
}  // namespace ssm
