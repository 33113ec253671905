// `ssm grad` and `ssm score --input` against the goldens' grads.safetensors
// (float64 reference loss and gradients, SPEC §7).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ssm/io/safetensors.h"
#include "support/compare.h"

namespace ssm {
namespace {

struct CliRun {
  int code;
  std::string out, err;
};

CliRun run_cli(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string out = (dir / cat("ssm_tg_out_", ::getpid())).string();
  const std::string err = (dir / cat("ssm_tg_err_", ::getpid())).string();
  const int status = std::system(cat(SSM_CLI_PATH, " ", args, " >", out, " 2>", err).c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  CliRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

class TrainCliGrad : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainCliGrad, GradCommandMatchesReferenceGradients) {
  const std::string dir = testing::golden_dir(GetParam());
  const std::string out =
      (std::filesystem::temp_directory_path() / cat("ssm_grad_", GetParam(), "_", ::getpid(), ".safetensors")).string();
  const CliRun r = run_cli(cat("grad ", dir, " --input ", dir, "/golden.safetensors --output ", out, " --threads 2"));
  if (r.code != 0 && (r.err.find("not implemented yet") != std::string::npos ||
                      r.err.find("not supported yet") != std::string::npos))
    GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const SafetensorsFile got = SafetensorsFile::open(out);
  const SafetensorsFile ref = SafetensorsFile::open(dir + "/grads.safetensors");
  EXPECT_EQ(got.names().size(), ref.names().size());
  for (const std::string& name : ref.names()) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_LE(testing::max_rel_error(got.get(name), ref.get(name)), name == "loss" ? 1e-5 : 1e-3) << name;
  }
  std::filesystem::remove(out);
}

TEST_P(TrainCliGrad, ScoreOfInputRowsMatchesReferenceLoss) {
  const std::string dir = testing::golden_dir(GetParam());
  const CliRun r = run_cli(cat("score ", dir, " --input ", dir, "/golden.safetensors"));
  if (r.code != 0 && r.err.find("not supported yet") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("mean loss:");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double loss = std::stod(r.out.substr(at + 10));
  const SafetensorsFile ref = SafetensorsFile::open(dir + "/grads.safetensors");
  const double ref_loss = ref.get("loss").to_f32().data<float>()[0];
  EXPECT_NEAR(loss, ref_loss, 2e-5 * ref_loss) << r.out;
  EXPECT_NE(r.out.find("row 1: loss"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Cases, TrainCliGrad,
                         ::testing::Values("mamba2_hf_tiny", "mamba2_ssm_tiny", "mamba3_siso_tiny",
                                           "mamba3_mimo_tiny", "hybrid_tiny"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ssm
