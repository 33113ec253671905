// The local launcher with small shell programs as ranks: the variables each
// rank gets, a clean run, and a rank that fails or is killed stopping the
// others in bounded time with an error naming it.
#include "ssm/dist/local_launch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "ssm/core/error.h"
#include "support/temp_dir.h"

namespace ssm::dist {
namespace {

using namespace std::chrono_literals;

std::string launch_error(const LocalLaunch& l) {
  try {
    run_local_ranks(l);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LocalLaunch, EveryRankGetsItsVariables) {
  testing::TempDir dir;
  // Each rank writes what it was given; NCCL's NVLink multicast is off.
  const std::string script =
      "[ \"$NCCL_NVLS_ENABLE\" = 0 ] || exit 5; echo \"$RANK $WORLD_SIZE $LOCAL_RANK "
      "$LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT\" > " +
      dir.path().string() + "/rank$RANK";
  LocalLaunch l{.argv = {"/bin/sh", "-c", script}, .ranks = 3, .master_port = 4321};
  EXPECT_EQ(run_local_ranks(l), 0);
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(dir / ("rank" + std::to_string(r)));
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, cat(r, " 3 ", r, " 3 127.0.0.1 4321"));
  }
}

TEST(LocalLaunch, InterruptedRanksAreNotFailures) {
  LocalLaunch l{.argv = {"/bin/sh", "-c", "[ $RANK = 1 ] && exit 130; exit 0"}, .ranks = 2};
  EXPECT_EQ(run_local_ranks(l), 130);
}

TEST(LocalLaunch, FailedRankStopsTheOthers) {
  const auto t0 = std::chrono::steady_clock::now();
  LocalLaunch l{
      .argv = {"/bin/sh", "-c", "if [ $RANK = 2 ]; then sleep 0.2; exit 3; fi; exec sleep 600"},
      .ranks = 4};
  const std::string m = launch_error(l);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_NE(m.find("rank 2 of 4"), std::string::npos) << m;
  EXPECT_NE(m.find("exited with status 3"), std::string::npos) << m;
}

TEST(LocalLaunch, KilledRankIsNamedAndOthersThatIgnoreTermAreKilled) {
  const auto t0 = std::chrono::steady_clock::now();
  // Ranks 0 and 2 ignore SIGTERM: the launcher's SIGKILL after the grace ends them.
  LocalLaunch l{.argv = {"/bin/sh", "-c",
                         "if [ $RANK = 1 ]; then sleep 0.2; kill -9 $$; fi; trap '' TERM; "
                         "while :; do sleep 0.05; done"},
                .ranks = 3,
                .grace = 500ms};
  const std::string m = launch_error(l);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_NE(m.find("rank 1 of 3"), std::string::npos) << m;
  EXPECT_NE(m.find("killed by signal 9"), std::string::npos) << m;
}

TEST(LocalLaunch, MissingProgramIsAFailedRank) {
  LocalLaunch l{.argv = {"/nonexistent/ssm"}, .ranks = 2};
  EXPECT_NE(launch_error(l).find("exited with status 127"), std::string::npos);
}

}  // namespace
}  // namespace ssm::dist
