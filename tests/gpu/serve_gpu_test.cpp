// ssm serve with a replica on a GPU and one on the CPU (label gpu; SSM_CUDA
// builds): `--gpus 0 --devices cpu`. A session starts on the GPU, moves to
// the CPU and back between its requests; each move rewrites its state file
// with the same bytes (the round trip through the other device is exact),
// and each request gives what `ssm generate --session` gives from the same
// file on the same device. With two GPUs, the same between them. A GPU
// that does not exist is a usage error naming --gpus.
#include <gtest/gtest.h>

#if defined(SSM_SERVE_GPU_TESTS)

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <filesystem>
#include <future>

#include "serve/serve_process.h"
#include "support/compare.h"

namespace ssm::testing {
namespace {

namespace fs = std::filesystem;

const std::string kModel = golden_dir("mamba2_hf_tiny");
const std::vector<std::vector<int64_t>> kTurns = {
    {65, 110, 100, 32}, {3, 17, 42, 9, 1, 77}, {10, 84, 104, 101}};

std::string ids_text(const std::vector<int64_t>& ids) {
  std::string s;
  for (const int64_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// ssm serve records no CUDA graph on its GPU replicas; the generations it
// is compared with run the same kernels without graphs too.
void no_cuda_graphs() { ::setenv("SSM_CUDA_GRAPHS", "0", 1); }

// The ids `ssm generate --backend BACKEND --session COPY` generates after
// the prompt, from a copy of the state file `from`.
std::vector<int64_t> generate_from(const std::string& backend, const fs::path& from,
                                   const fs::path& copy, const std::vector<int64_t>& prompt) {
  fs::copy_file(from, copy, fs::copy_options::overwrite_existing);
  no_cuda_graphs();
  const CliRun r = run_ssm({"generate", kModel, "--backend", backend, "--session", copy.string(),
                            "--prompt-ids", ids_text(prompt), "--temperature", "0", "--max-tokens",
                            "6", "--threads", "1", "-q", "--json"});
  if (r.code != 0) throw std::runtime_error("ssm generate failed: " + r.err);
  return json::parse(r.out)["ids"].get<std::vector<int64_t>>();
}

std::vector<int64_t> complete(httplib::Client& c, const std::vector<int64_t>& prompt) {
  const Reply r =
      post(c, "/v1/completions",
           json{{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"session", "conv"}});
  if (r.status != 200) throw std::runtime_error(r.raw);
  return r.body["ssm"]["completion_ids"].get<std::vector<int64_t>>();
}

void move_to(httplib::Client& c, int replica, const std::string& device) {
  const Reply r = post(c, "/v1/sessions/conv/move", json{{"replica", replica}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["replica"], replica);
  EXPECT_EQ(r.body["device"], device);
}

TEST(ServeGpu, SessionMovedGpuCpuGpuContinuesExactly) {
  TempDir dir;
  ServeProcess server(kModel, dir / "sessions", {"--gpus", "0", "--devices", "cpu"});
  auto c = server.client();
  const Reply replicas = get(*c, "/v1/replicas");
  ASSERT_EQ(replicas.status, 200) << replicas.raw;
  ASSERT_EQ(replicas.body["data"].size(), 2u);
  EXPECT_EQ(replicas.body["data"][0]["device"], "cuda:0");
  EXPECT_EQ(replicas.body["data"][1]["device"], "cpu");
  const fs::path file = dir / "sessions" / "conv.state";

  // On the GPU (the first replica takes the first session).
  const auto a = complete(*c, kTurns[0]);
  EXPECT_EQ(get(*c, "/v1/sessions/conv").body["device"], "cuda:0");
  EXPECT_EQ(a.size(), 6u);  // (equal to generate on the GPU: the next test)
  const std::string after_a = slurp_file(file);
  ASSERT_FALSE(after_a.empty());

  // GPU -> CPU -> GPU without a request: the file is rewritten each time
  // with the same bytes.
  move_to(*c, 1, "cpu");
  EXPECT_TRUE(slurp_file(file) == after_a);
  move_to(*c, 0, "cuda:0");
  EXPECT_TRUE(slurp_file(file) == after_a);

  // To the CPU, one request there: what the CPU backend continues with from that file.
  fs::copy_file(file, dir / "after_a.state");
  move_to(*c, 1, "cpu");
  const auto b = complete(*c, kTurns[1]);
  EXPECT_EQ(b, generate_from("cpu", dir / "after_a.state", dir / "g1.state", kTurns[1]));
  fs::copy_file(file, dir / "after_b.state");

  // Back to the GPU: what the cuda backend continues with from that file.
  move_to(*c, 0, "cuda:0");
  const auto c3 = complete(*c, kTurns[2]);
  EXPECT_EQ(c3, generate_from("cuda", dir / "after_b.state", dir / "g2.state", kTurns[2]));
  EXPECT_EQ(server.stop().code, 0);
}

TEST(ServeGpu, FirstRequestOnTheGpuEqualsGenerateOnTheGpu) {
  TempDir dir;
  ServeProcess server(kModel, dir / "sessions", {"--gpus", "0"});
  auto c = server.client();
  const auto a = complete(*c, kTurns[0]);
  no_cuda_graphs();
  const CliRun r =
      run_ssm({"generate", kModel, "--backend", "cuda", "--prompt-ids", ids_text(kTurns[0]),
               "--temperature", "0", "--max-tokens", "6", "--threads", "1", "-q", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(a, json::parse(r.out)["ids"].get<std::vector<int64_t>>());
  EXPECT_EQ(server.stop().code, 0);
}

// Two GPUs (skipped with fewer): a session moved GPU 0 -> GPU 1 -> GPU 0
// continues as `ssm generate --backend cuda` does from the same files, and
// two sessions run at once on the two GPUs give what they give alone.
TEST(ServeGpu, SessionMovedBetweenTwoGpusContinuesExactly) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  TempDir dir;
  ServeProcess server(kModel, dir / "sessions", {"--gpus", "0,1"});
  auto c = server.client();
  const fs::path file = dir / "sessions" / "conv.state";
  complete(*c, kTurns[0]);
  EXPECT_EQ(get(*c, "/v1/sessions/conv").body["device"], "cuda:0");
  const std::string after_a = slurp_file(file);
  fs::copy_file(file, dir / "after_a.state");
  move_to(*c, 1, "cuda:1");
  EXPECT_TRUE(slurp_file(file) == after_a);
  const auto b = complete(*c, kTurns[1]);
  EXPECT_EQ(b, generate_from("cuda", dir / "after_a.state", dir / "g1.state", kTurns[1]));
  fs::copy_file(file, dir / "after_b.state");
  move_to(*c, 0, "cuda:0");
  const auto c3 = complete(*c, kTurns[2]);
  EXPECT_EQ(c3, generate_from("cuda", dir / "after_b.state", dir / "g2.state", kTurns[2]));

  // Two new sessions, one per GPU (the least loaded takes the next), at once.
  const auto turns = [&](const std::string& session) {
    auto own = server.client();
    std::vector<std::vector<int64_t>> out;
    for (const auto& t : kTurns)
      out.push_back(post(*own, "/v1/completions",
                         json{{"prompt", t}, {"max_tokens", 6}, {"temperature", 0}, {"session", session}})
                        .body["ssm"]["completion_ids"]
                        .get<std::vector<int64_t>>());
    return out;
  };
  const auto alone = turns("alone");
  auto x = std::async(std::launch::async, [&] { return turns("x"); });
  auto y = std::async(std::launch::async, [&] { return turns("y"); });
  EXPECT_EQ(x.get(), alone);
  EXPECT_EQ(y.get(), alone);
  EXPECT_NE(get(*c, "/v1/sessions/x").body["replica"], get(*c, "/v1/sessions/y").body["replica"]);
  EXPECT_EQ(server.stop().code, 0);
}

TEST(ServeGpu, MissingGpuIsAUsageErrorNamingTheFlag) {
  const CliRun r = run_ssm({"serve", kModel, "--port", "0", "--gpus", "0,1023"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--gpus 1023: cuda: there is no device 1023"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ssm::testing

#endif  // SSM_SERVE_GPU_TESTS
