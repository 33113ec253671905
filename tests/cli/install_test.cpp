// `cmake --install` gives a program that works on its own: bin/ssm finds the
// built-in model in share/ssm beside it, wherever the installation is moved
// and whatever the current directory; the build tree follows the same rule.
#include <gtest/gtest.h>

#include <fstream>

#include "support/cli.h"
#include "support/compare.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::run_ssm;

const fs::path kSourceModel = fs::path(SSM_GOLDEN_DIR).parent_path().parent_path() / "models" / "default";
const std::vector<std::string> kGenerate = {"generate", "-p", "And God said", "-n", "8", "--temperature", "0",
                                            "--print-ids", "--threads", "1"};

// Built by appending: GCC 13 reports a false -Warray-bounds in the inlined
// vector::insert this used (seen on the device machine's g++ 13).
std::vector<std::string> with_model(const std::string& model) {
  std::vector<std::string> args{kGenerate.front(), model};
  for (size_t i = 1; i < kGenerate.size(); ++i) args.push_back(kGenerate[i]);
  return args;
}

TEST(Install, InstalledProgramFindsItsModelWhereverItIs) {
  testing::TempDir tmp;
  const std::string install = std::string("'") + SSM_CMAKE_COMMAND + "' --install '" + SSM_BUILD_DIR +
                              "' --prefix '" + (tmp / "prefix").string() + "' >/dev/null";
  ASSERT_EQ(std::system(install.c_str()), 0) << install;
  ASSERT_TRUE(fs::is_regular_file(tmp / "prefix/bin/ssm"));
  ASSERT_TRUE(fs::is_regular_file(tmp / "prefix/share/ssm/models/default/model.safetensors"));
  fs::rename(tmp / "prefix", tmp / "moved");
  const std::string ssm = (tmp / "moved/bin/ssm").string();

  const testing::CliRun expected = run_ssm(with_model(kSourceModel.string()));
  ASSERT_EQ(expected.code, 0) << expected.err;
  const testing::CliRun installed = testing::CliProcess(kGenerate, "", ssm, "/").wait();
  EXPECT_EQ(installed.code, 0) << installed.err;
  EXPECT_EQ(installed.out, expected.out);

  // It is that directory's model that runs, not one the build knows of.
  const fs::path installed_model = tmp / "moved/share/ssm/models/default";
  fs::remove_all(installed_model);
  fs::create_directories(installed_model);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(testing::golden_dir("mamba2_hf_tiny") + "/" + f, installed_model / f);
  std::vector<std::string> ids = kGenerate;
  ids[2] = "Hi";
  const testing::CliRun other = testing::CliProcess(ids, "", ssm, "/").wait();
  ids.insert(ids.begin() + 1, testing::golden_dir("mamba2_hf_tiny"));
  EXPECT_EQ(other.code, 0) << other.err;
  EXPECT_EQ(other.out, run_ssm(ids).out);
}

TEST(Install, BuildTreeProgramFollowsTheSameRule) {
  const testing::CliRun expected = run_ssm(with_model(kSourceModel.string()));
  const testing::CliRun built = testing::CliProcess(kGenerate, "", SSM_CLI_PATH, "/").wait();
  ASSERT_EQ(built.code, 0) << built.err;
  EXPECT_EQ(built.out, expected.out);
  EXPECT_TRUE(fs::is_regular_file(fs::path(SSM_CLI_PATH).parent_path() / "../share/ssm/models/default/config.json"));
}

// The commands that read a model run the built-in one when MODEL is left
// out, as generate does; where it is not installed they say so.
TEST(Install, CommandsWithoutModelReadTheBuiltInModel) {
  testing::TempDir tmp;
  const fs::path data = tmp / "data.txt";
  std::ofstream(data) << "In the beginning God created the heaven and the earth.\n";
  const std::vector<std::vector<std::string>> commands = {
      {"tokenize", "--text", "And God said"}, {"score", "--data", data.string(), "--all", "-t", "1"}};
  for (const std::vector<std::string>& args : commands) {
    std::vector<std::string> explicit_args = args;
    explicit_args.insert(explicit_args.begin() + 1, kSourceModel.string());
    const testing::CliRun expected = run_ssm(explicit_args);
    ASSERT_EQ(expected.code, 0) << expected.err;
    const testing::CliRun implicit = testing::CliProcess(args, "", SSM_CLI_PATH, "/").wait();
    EXPECT_EQ(implicit.code, 0) << args[0] << ": " << implicit.err;
    EXPECT_EQ(implicit.out, expected.out) << args[0];
  }

  const std::string install = std::string("'") + SSM_CMAKE_COMMAND + "' --install '" + SSM_BUILD_DIR +
                              "' --prefix '" + (tmp / "prefix").string() + "' >/dev/null";
  ASSERT_EQ(std::system(install.c_str()), 0) << install;
  fs::remove_all(tmp / "prefix/share/ssm/models/default");
  const testing::CliRun missing = testing::CliProcess({"info"}, "", (tmp / "prefix/bin/ssm").string(), "/").wait();
  EXPECT_EQ(missing.code, 1) << missing.err;
  EXPECT_TRUE(testing::contains(missing.err, "the built-in model is not installed at")) << missing.err;
}

}  // namespace
}  // namespace ssm
