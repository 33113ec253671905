// The rendezvous and the collectives over several real processes on
// loopback: the blob reaches every rank, sums are the same bits everywhere,
// a rank that never arrives or dies makes the others fail naming it, in
// bounded time.
#include "ssm/dist/group.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "dist/ranks.h"

namespace ssm::dist {
namespace {

using testing::run_ranks;
using namespace std::chrono_literals;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Group, BlobReachesEveryRankAndSumsAgree) {
  const int n = 4;
  const auto results = run_ranks(n, [&](const LaunchEnv& env) {
    std::string blob = env.rank == 0 ? std::string("unique-id\0bytes", 15) : "";
    Group g = Group::rendezvous(env, blob, 20s);
    if (blob != std::string("unique-id\0bytes", 15)) return 10;
    // Values whose float sum depends on the order: every rank must still
    // get rank 0's bits, and they equal the sum in rank order.
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = std::sin(static_cast<float>(i * (env.rank + 1))) * 1e3f;
    g.all_reduce_mean(v.data(), v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += std::sin(static_cast<float>(i * (r + 1))) * 1e3f;
      want *= 1.0f / n;
      if (std::memcmp(&want, &v[i], sizeof want) != 0) return 11;
    }
    double d[2] = {1.0 * env.rank, 1.0};
    g.all_reduce_sum(d, 2);
    return d[0] == 6.0 && d[1] == 4.0 ? 0 : 12;
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(results[r].code, 0) << "rank " << r << ": " << results[r].error;
}

TEST(Group, OneRankNeedsNoPeers) {
  std::string blob = "x";
  Group g = Group::rendezvous(
      LaunchEnv{.rank = 0, .world_size = 1, .master_addr = "127.0.0.1", .master_port = 1}, blob,
      1s);
  double d = 3;
  g.all_reduce_sum(&d, 1);
  EXPECT_EQ(d, 3);
}

TEST(Group, RendezvousTimeoutNamesTheMissingRanks) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = run_ranks(4,
                                 [](const LaunchEnv& env) {
                                   std::string blob = "id";
                                   Group::rendezvous(env, blob, 1500ms);
                                   return 0;
                                 },
                                 /*start=*/{0, 1});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
  EXPECT_EQ(results[0].code, 1);
  EXPECT_TRUE(has(results[0].error, "ranks 2, 3 of 4 did not arrive")) << results[0].error;
  // The rank that did arrive hears it from rank 0.
  EXPECT_EQ(results[1].code, 1);
  EXPECT_TRUE(has(results[1].error, "ranks 2, 3 of 4 did not arrive")) << results[1].error;
}

TEST(Group, RankWithoutRankZeroTimesOut) {
  const auto results = run_ranks(2,
                                 [](const LaunchEnv& env) {
                                   std::string blob;
                                   Group::rendezvous(env, blob, 1s);
                                   return 0;
                                 },
                                 /*start=*/{1});
  EXPECT_EQ(results[1].code, 1);
  EXPECT_TRUE(has(results[1].error, "cannot reach rank 0 at 127.0.0.1:")) << results[1].error;
}

TEST(Group, DeadRankIsNamedByEveryOtherRank) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = run_ranks(3, [](const LaunchEnv& env) {
    std::string blob = "id";
    Group g = Group::rendezvous(env, blob, 20s);
    double d = 1;
    g.all_reduce_sum(&d, 1);
    if (env.rank == 2) ::raise(SIGKILL);  // dies between two collectives
    g.all_reduce_sum(&d, 1);
    return 0;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
  EXPECT_EQ(results[2].code, 128 + SIGKILL);
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code, 1);
    EXPECT_TRUE(has(results[r].error, "rank 2 of 3 exited"))
        << "rank " << r << ": " << results[r].error;
  }
}

TEST(Group, DeadRankZeroIsNamed) {
  const auto results = run_ranks(2, [](const LaunchEnv& env) {
    std::string blob = "id";
    Group g = Group::rendezvous(env, blob, 20s);
    if (env.rank == 0) ::raise(SIGKILL);
    double d = 1;
    g.all_reduce_sum(&d, 1);
    return 0;
  });
  EXPECT_EQ(results[1].code, 1);
  EXPECT_TRUE(has(results[1].error, "rank 0 closed its connection")) << results[1].error;
}

TEST(Group, MismatchedSizesAreRefused) {
  const auto results = run_ranks(2, [](const LaunchEnv& env) {
    std::string blob = "id";
    Group g = Group::rendezvous(env, blob, 20s);
    std::vector<double> d(env.rank == 0 ? 3 : 4, 1.0);
    g.all_reduce_sum(d.data(), d.size());
    return 0;
  });
  EXPECT_EQ(results[0].code, 1);
  EXPECT_TRUE(has(results[0].error, "rank 1 sent 32 bytes to a collective of 24"))
      << results[0].error;
  EXPECT_EQ(results[1].code, 1);
}

}  // namespace
}  // namespace ssm::dist
