// ssm bench --backend cuda on a tiny `ssm init` model: the model runs on
// the GPU (it once failed at its first op: the weights were never
// uploaded), every row has a positive rate and a bound measured on the
// device (bf16-linear for prefill, copy for decode) with its fraction, the
// peak is the device's; flags at their edges work or fail with a message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

using testing::contains;
using testing::run_ssm;

class CudaBench : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "config.json") << R"({"d_model": 32, "n_layer": 2, "vocab_size": 256,
      "pad_vocab_size_multiple": 8, "d_intermediate": 0, "attn_layer_idx": [], "attn_cfg": {},
      "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "chunk_size": 8},
      "tie_embeddings": true})";
    const testing::CliRun init =
        run_ssm({"init", "--config", (dir_ / "config.json").string(), "--out", model()});
    ASSERT_EQ(init.code, 0) << init.err;
  }
  std::string model() const { return (dir_ / "m").string(); }

 private:
  testing::TempDir dir_;
};

TEST_F(CudaBench, RowsRunOnTheDeviceAgainstItsBounds) {
  const testing::CliRun r = run_ssm({"bench", model(), "--backend", "cuda", "-p", "16", "-n", "4", "-r",
                                     "2", "-b", "1,3", "-t", "1", "--dtype", "f32,bf16,f16", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["bounds"].size(), 1u);
  const auto& b = doc["bounds"][0];
  EXPECT_EQ(b["device"], "cuda:0");
  EXPECT_GT(b["bf16_linear_flops"].get<double>(), 1e12);  // any GPU of the last decade
  EXPECT_GT(b["copy_bytes_per_s"].get<double>(), 1e10);
  ASSERT_EQ(doc["results"].size(), 12u);  // 3 dtypes x 2 batches x (prefill, decode)
  for (const auto& row : doc["results"]) {
    SCOPED_TRACE(row.dump());
    EXPECT_EQ(row["repetitions"], 2);
    const double tps = row["tokens_per_s"], bound = row["bound_tokens_per_s"];
    EXPECT_GT(tps, 0);
    EXPECT_GT(bound, 0);
    EXPECT_NEAR(row["fraction_of_bound"].get<double>(), tps / bound, 1e-9 * tps / bound);
    EXPECT_EQ(row["bound"], row["test"] == "pp16" ? "bf16-linear" : "copy");
    // The device's tensors: at least the weights, within the device.
    const double peak = row["peak_device_bytes"], capacity = row["device_capacity_bytes"];
    EXPECT_GT(peak, row["test"] == "tg4" ? row["weight_bytes_per_step"].get<double>() : 0.0);
    EXPECT_LT(peak, capacity);
    EXPECT_FALSE(row.contains("peak_rss_bytes"));
  }
}

TEST_F(CudaBench, MarkdownNamesTheDeviceBounds) {
  const testing::CliRun r = run_ssm({"bench", model(), "--backend", "cuda", "-p", "16", "-n", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "bounds on cuda:0")) << r.out;
  EXPECT_TRUE(contains(r.out, "| of copy+state | peak device memory |")) << r.out;
  EXPECT_TRUE(contains(r.out, " (bf16-linear) |")) << r.out;
  EXPECT_TRUE(contains(r.out, " (copy) |")) << r.out;
}

TEST_F(CudaBench, FlagsAtTheirEdges) {
  for (const std::vector<std::string>& more : std::vector<std::vector<std::string>>{
           {"-p", "0", "-n", "1"},             // decode from the empty state
           {"-p", "1", "-n", "0"},             // one-token prefill
           {"-p", "1", "-n", "1", "-b", "4096"},  // more sequences than the step's counters
           {"-p", "2", "-n", "2", "-t", "1,2"},   // bounds for each thread count
           {"-p", "2", "-n", "2", "--dtype", "auto"}}) {
    std::vector<std::string> args = {"bench", model(), "--backend", "cuda", "-r", "1", "--json"};
    args.insert(args.end(), more.begin(), more.end());
    const testing::CliRun r = run_ssm(args);
    ASSERT_EQ(r.code, 0) << more.at(0) << " " << more.at(1) << "...\n" << r.err;
    const nlohmann::json doc = nlohmann::json::parse(r.out);
    EXPECT_FALSE(doc["results"].empty()) << r.out;
    for (const auto& row : doc["results"]) EXPECT_GT(row["tokens_per_s"].get<double>(), 0) << row.dump();
  }
}

TEST_F(CudaBench, Int8IsRefusedByName) {
  // The cuda backend has no Q8 projections: an error naming the dtype and
  // the backend, not a crash.
  const testing::CliRun r =
      run_ssm({"bench", model(), "--backend", "cuda", "--dtype", "int8", "-p", "4", "-n", "2", "-r", "1"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("ssm: error: --dtype int8 on backend 'cuda': ", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, "Q8")) << r.err;
}

}  // namespace
}  // namespace ssm
