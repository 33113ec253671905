// The torchrun variables: absent (one process), complete, and every way of
// getting them wrong, each with an error naming the variable.
#include "ssm/dist/launch_env.h"

#include <gtest/gtest.h>

#include <map>

#include "ssm/core/error.h"

namespace ssm::dist {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

std::map<std::string, std::string> full() {
  return {{"RANK", "2"},
          {"WORLD_SIZE", "4"},
          {"LOCAL_RANK", "0"},
          {"MASTER_ADDR", "node7"},
          {"MASTER_PORT", "29500"}};
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read_launch_env(env_of(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnv, NoneSetIsOneProcess) { EXPECT_FALSE(read_launch_env(env_of({})).has_value()); }

TEST(LaunchEnv, ReadsTheTorchrunVariables) {
  const auto e = read_launch_env(env_of(full()));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 0);
  EXPECT_EQ(e->master_addr, "node7");
  EXPECT_EQ(e->master_port, 29500);
}

TEST(LaunchEnv, LocalRankDefaultsToRank) {
  auto vars = full();
  vars.erase("LOCAL_RANK");
  EXPECT_EQ(read_launch_env(env_of(vars))->local_rank, 2);
}

TEST(LaunchEnv, PartialEnvironmentNamesWhatIsMissing) {
  auto vars = full();
  vars.erase("MASTER_PORT");
  vars.erase("MASTER_ADDR");
  const std::string m = error_of(vars);
  EXPECT_NE(m.find("MASTER_ADDR, MASTER_PORT are not"), std::string::npos) << m;
}

TEST(LaunchEnv, BadValuesNameTheVariable) {
  const std::pair<const char*, const char*> bad[] = {
      {"RANK", "4"},          {"RANK", "-1"},       {"RANK", "one"},
      {"WORLD_SIZE", "0"},    {"MASTER_PORT", "0"}, {"MASTER_PORT", "65536"},
      {"MASTER_PORT", "80x"}, {"LOCAL_RANK", ""},   {"MASTER_ADDR", ""}};
  for (const auto& [name, value] : bad) {
    auto vars = full();
    vars[name] = value;
    const std::string m = error_of(vars);
    EXPECT_NE(m.find(name), std::string::npos) << name << "=" << value << ": '" << m << "'";
  }
}

TEST(LaunchEnv, VisibleDeviceIsTheLocalRanksEntry) {
  EXPECT_EQ(visible_device_for(1, std::nullopt), "1");
  EXPECT_EQ(visible_device_for(0, std::string("")), "0");
  EXPECT_EQ(visible_device_for(1, std::string("4,6,7")), "6");
  EXPECT_THROW(visible_device_for(3, std::string("4,6,7")), Error);
}

}  // namespace
}  // namespace ssm::dist
