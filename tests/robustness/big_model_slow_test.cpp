// A mamba-2.8b-shaped Mamba-1 (d_model 2560, 64 layers, vocab 50280; 2.8B
// parameters, 5.5 GB in BF16) made by `ssm init --dtype bf16` in 2 GB shards
// and decoded by `ssm generate --dtype bf16`: init needs the memory of about
// one tensor, and decoding from the mapped shards keeps the peak resident
// memory (the child's ru_maxrss) within 1.1x the weights. Label slow (the
// name holds "Slow"): it writes 5.5 GB and reads them back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>

#include "ssm/io/json.h"
#include "support/mamba1_config.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

struct Measured {
  int code = -1;
  int64_t max_rss = 0;  // bytes
  double seconds = 0;
};

// Runs the built ssm with args, its output into out_file; the peak resident
// memory from wait4 (it also counts the few MB of the test process forked).
Measured run_measured(const std::vector<std::string>& args, const fs::path& out_file) {
  std::vector<std::string> argv_text = {SSM_CLI_PATH};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int f = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(f, STDOUT_FILENO);
    ::dup2(f, STDERR_FILENO);
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
  }
  Measured m;
  m.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  m.max_rss = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // kB
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(BigModelSlow, Mamba28bShapedBf16DecodesWithinItsWeights) {
  testing::TempDir tmp;
  const fs::path space = tmp.path();
  const std::uintmax_t free_bytes = fs::space(space).available;
  if (free_bytes < (uintmax_t{8} << 30))
    GTEST_SKIP() << "needs 8 GB of free disk, " << free_bytes << " free";
  testing::write_bytes(tmp / "config.json",
                       testing::mamba1_hf_config({.hidden = 2560, .layers = 64, .vocab = 50280}));
  const fs::path model = tmp / "mamba-2.8b-bf16";

  const Measured init =
      run_measured({"init", "--config", (tmp / "config.json").string(), "--out", model.string(),
                    "--dtype", "bf16", "--shard-size", "2G", "--seed", "1"},
                   tmp / "init.log");
  ASSERT_EQ(init.code, 0) << slurp(tmp / "init.log");
  const Json index = load_json_file(model / "model.safetensors.index.json");
  const auto weights = index["metadata"]["total_size"].get<int64_t>();
  EXPECT_GT(weights, int64_t{5} << 30);
  // The largest tensor is the embedding: drawn in F32 (515 MB), rounded (257 MB).
  const int64_t embedding_f32 = int64_t{50280} * 2560 * 4;
  EXPECT_LT(init.max_rss, embedding_f32 * 2) << "init's peak resident memory";

  const Measured gen =
      run_measured({"generate", model.string(), "--dtype", "bf16", "--prompt-ids",
                    "1,2,3,4,5,6,7,8", "-n", "8", "--temp", "0", "--ignore-eos", "--print-ids"},
                   tmp / "generate.log");
  const std::string log = slurp(tmp / "generate.log");
  ASSERT_EQ(gen.code, 0) << log;
  EXPECT_LE(static_cast<double>(gen.max_rss), 1.1 * static_cast<double>(weights)) << log;
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items())
    files.insert(file.get<std::string>());
  const size_t shard_count = files.size();
  std::printf(
      "mamba-2.8b-shaped BF16: %lld weight bytes in %zu shards; init %.1f s, peak RSS %.3f GB; "
      "generate (8 prompt + 8 new tokens) %.1f s, peak RSS %.3f GB = %.3f x the weights\n%s",
      static_cast<long long>(weights), shard_count, init.seconds,
      static_cast<double>(init.max_rss) / 1e9, gen.seconds, static_cast<double>(gen.max_rss) / 1e9,
      static_cast<double>(gen.max_rss) / static_cast<double>(weights), log.c_str());
}

}  // namespace
}  // namespace ssm
