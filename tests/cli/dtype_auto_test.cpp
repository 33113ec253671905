// --dtype auto, the default of the commands that only compute: a checkpoint
// stored in BF16 computes in BF16 (the logits bits and generated ids of
// --dtype bf16, not those of --dtype f32), one stored in F32 as before, one
// stored in several dtypes in F32; `ssm info` names what is stored and what
// auto picks; training keeps F32 weights; bad values are usage errors naming
// the flag on every command that takes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "support/cli.h"
#include "support/mamba1_config.h"
#include "support/usage_error.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::expect_usage_error;
using testing::run_ssm;

// One random model written by `ssm init` in F32 and in BF16 (same seed), and
// a copy of the BF16 one whose embedding is stored in F32 (mixed storage).
class DtypeAuto : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir;
    const std::string config = (*tmp_ / "config.json").string();
    testing::write_bytes(config, testing::mamba1_hf_config(
                                     {.hidden = 64, .layers = 2, .vocab = 512, .tied = false}));
    ASSERT_EQ(run_ssm({"init", "--config", config, "--out", f32(), "--seed", "7"}).code, 0);
    const testing::CliRun made =
        run_ssm({"init", "--config", config, "--out", bf16(), "--seed", "7", "--dtype", "bf16"});
    ASSERT_EQ(made.code, 0) << made.err;
    fs::create_directories(mixed());
    fs::copy_file(fs::path(bf16()) / "config.json", fs::path(mixed()) / "config.json");
    const SafetensorsFile stored = SafetensorsFile::open(fs::path(bf16()) / "model.safetensors");
    NamedTensors tensors;
    for (const std::string& name : stored.names()) {
      Tensor t = stored.get(name).clone();
      tensors.emplace_back(name, name == "backbone.embeddings.weight" ? t.to_f32() : t);
    }
    save_safetensors(fs::path(mixed()) / "model.safetensors", tensors);
    Tensor ids = Tensor::empty(DType::kI64, {1, 6});
    const int64_t values[] = {3, 17, 42, 9, 300, 5};
    std::memcpy(ids.raw(), values, sizeof values);
    save_safetensors(input(), {{"input_ids", ids}});
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static std::string f32() { return (*tmp_ / "f32").string(); }
  static std::string bf16() { return (*tmp_ / "bf16").string(); }
  static std::string mixed() { return (*tmp_ / "mixed").string(); }
  static std::string input() { return (*tmp_ / "ids.safetensors").string(); }

  // `ssm logits` of the input ids, with extra flags; the logits' bits.
  static std::vector<uint32_t> logits(const std::string& model,
                                      std::vector<std::string> extra = {}) {
    static int n = 0;
    const std::string out = (*tmp_ / cat("logits", n++, ".safetensors")).string();
    std::vector<std::string> args = {"logits",   model, "--input",   input(),
                                     "--output", out,   "--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const testing::CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 0) << r.err;
    if (r.code != 0) return {};
    const Tensor t = SafetensorsFile::open(out).get("logits");
    std::vector<uint32_t> bits(static_cast<size_t>(t.numel()));
    std::memcpy(bits.data(), t.raw(), bits.size() * sizeof(uint32_t));
    return bits;
  }

  static testing::TempDir* tmp_;
};

testing::TempDir* DtypeAuto::tmp_ = nullptr;

TEST_F(DtypeAuto, Bf16CheckpointComputesInBf16ByDefault) {
  const std::vector<uint32_t> by_default = logits(bf16()),
                              bf16_bits = logits(bf16(), {"--dtype", "bf16"});
  ASSERT_FALSE(by_default.empty());
  EXPECT_EQ(by_default, bf16_bits);
  // BF16 values widen to F32 exactly, and the BF16 kernels widen them in
  // registers: the logits may equal those of F32 weights, so the dtype
  // loaded is checked through `ssm info` and the library (below).
  const testing::CliRun info = run_ssm({"info", bf16(), "--json"});
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["projections"]["loaded"], "bf16") << info.out;
  // And the generated ids.
  const std::vector<std::string> gen = {
      "generate", bf16(),         "--prompt-ids", "3,17,42,9", "-n",        "12", "--temp",
      "0",        "--ignore-eos", "--print-ids",  "-q",        "--threads", "2"};
  std::vector<std::string> explicit_bf16 = gen;
  explicit_bf16.insert(explicit_bf16.end(), {"--dtype", "bf16"});
  const testing::CliRun a = run_ssm(gen), b = run_ssm(explicit_bf16);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_GT(std::count(a.out.begin(), a.out.end(), ','), 12) << a.out;
  EXPECT_FALSE(contains(a.err, "widened")) << a.err;
}

TEST_F(DtypeAuto, F32CheckpointIsUnchangedByDefault) {
  const std::vector<uint32_t> by_default = logits(f32());
  ASSERT_FALSE(by_default.empty());
  EXPECT_EQ(by_default, logits(f32(), {"--dtype", "f32"}));
  EXPECT_NE(by_default, logits(f32(), {"--dtype", "bf16"}));
}

TEST_F(DtypeAuto, LibraryLoadsProjectionsAsStored) {
  auto projections_in = [](LanguageModel& m, DType dtype) {
    int n = 0;
    m.for_each_param([&](const std::string& name, Param& p) {
      if (p.role != ParamRole::kWeight || p.shape.size() != 2) return;
      EXPECT_EQ(p.value.dtype(), dtype) << name;
      ++n;
    });
    EXPECT_GE(n, 6);  // embedding, head, in/x/dt/out projections of each layer
  };
  LanguageModel as_stored = LanguageModel::load(bf16(), {.weights = std::nullopt});
  EXPECT_EQ(as_stored.projection_dtype(), DType::kBF16);
  projections_in(as_stored, DType::kBF16);
  LanguageModel wide = LanguageModel::load(bf16());  // the library's default: F32, for training
  EXPECT_EQ(wide.projection_dtype(), DType::kF32);
  projections_in(wide, DType::kF32);
  EXPECT_LT(model_memory_bytes(as_stored, as_stored.projection_dtype()),
            0.6 * static_cast<double>(model_memory_bytes(wide, wide.projection_dtype())));
  LanguageModel f32_model = LanguageModel::load(f32(), {.weights = std::nullopt});
  projections_in(f32_model, DType::kF32);
  // Mixed storage: F32, so that neither dtype's values are rounded.
  LanguageModel mixed_model(load_model_config(fs::path(mixed()) / "config.json"));
  const LanguageModel::AutoWeights w = mixed_model.auto_weights(*open_checkpoint(mixed()));
  EXPECT_EQ(w.dtype, DType::kF32);
  EXPECT_EQ(w.stored, (std::vector<DType>{DType::kF32, DType::kBF16}));
  LanguageModel loaded = LanguageModel::load(mixed(), {.weights = std::nullopt});
  projections_in(loaded, DType::kF32);
}

TEST_F(DtypeAuto, InfoNamesStoredDtypeAndAutosPick) {
  struct Case {
    std::string model, auto_pick;
    std::vector<std::string> stored;
  };
  for (const Case& c : {Case{bf16(), "bf16", {"BF16"}}, Case{f32(), "f32", {"F32"}},
                        Case{mixed(), "f32", {"F32", "BF16"}}}) {
    SCOPED_TRACE(c.model);
    const testing::CliRun json = run_ssm({"info", c.model, "--json"});
    ASSERT_EQ(json.code, 0) << json.err;
    const nlohmann::json p = nlohmann::json::parse(json.out)["projections"];
    EXPECT_EQ(p["auto"], c.auto_pick);
    EXPECT_EQ(p["loaded"], c.auto_pick);
    EXPECT_EQ(p["stored"].get<std::vector<std::string>>(), c.stored);
    const testing::CliRun text = run_ssm({"info", c.model});
    EXPECT_TRUE(contains(text.out, "--dtype auto loads them as " + c.auto_pick)) << text.out;
  }
}

TEST_F(DtypeAuto, MixedStorageSaysWhatItWidened) {
  const testing::CliRun r =
      run_ssm({"generate", mixed(), "--prompt-ids", "3,17", "-n", "2", "--temp", "0",
               "--ignore-eos", "--print-ids", "-q", "--threads", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "several dtypes")) << r.err;
  EXPECT_TRUE(contains(r.err, "--dtype bf16")) << r.err;
}

TEST_F(DtypeAuto, BenchRowsNameAutosPick) {
  const testing::CliRun r = run_ssm({"bench", bf16(), "-p", "4", "-n", "2", "-r", "1", "-t", "1",
                                     "--dtype", "auto,f32", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  std::vector<std::string> dtypes;
  double bf16_bytes = 0, f32_bytes = 0;
  for (const auto& row : doc["results"]) {
    dtypes.push_back(row["dtype"]);
    if (row["test"] == "tg2")
      (row["dtype"] == "bf16" ? bf16_bytes : f32_bytes) = row["weight_bytes_per_step"];
  }
  EXPECT_EQ(dtypes, (std::vector<std::string>{"bf16", "bf16", "f32", "f32"}));
  // A decode step reads the projections as loaded: about half the bytes.
  EXPECT_LT(bf16_bytes, 0.6 * f32_bytes);
}

TEST_F(DtypeAuto, TrainingKeepsF32Weights) {
  // grad computes a backward, which needs F32 weights: from a BF16
  // checkpoint by default it widens them.
  const std::string out = (*tmp_ / "grad.safetensors").string();
  const testing::CliRun g =
      run_ssm({"grad", bf16(), "--input", input(), "--output", out, "--threads", "2"});
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_TRUE(SafetensorsFile::open(out).contains("loss"));
  const testing::CliRun help = run_ssm({"train", "--help"});
  EXPECT_TRUE(contains(help.out, "f32 only")) << help.out;
  expect_usage_error({"grad", bf16(), "--input", input(), "--output", out, "--dtype", "auto"},
                     "--dtype auto: ssm grad needs f32 weights");
}

TEST_F(DtypeAuto, BadValuesAreUsageErrorsNamingTheFlag) {
  const std::string out = (*tmp_ / "never.safetensors").string();
  const std::vector<std::vector<std::string>> commands = {
      {"generate", bf16(), "-p", "x", "-n", "1"},
      {"logits", bf16(), "--input", input(), "--output", out},
      {"score", bf16(), "--data", input()},
      {"bench", bf16(), "-p", "4", "-n", "0"},
      {"serve", bf16(), "--port", "0"},
  };
  for (const auto& command : commands) {
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"--dtype", "bf17"}, {"--dtype", "AUTO"}, {"--dtype", ""}}) {
      std::vector<std::string> args = command;
      args.insert(args.end(), bad.begin(), bad.end());
      expect_usage_error(args, "--dtype");
    }
    if (command[0] == "bench") continue;  // bench takes a list: --dtype auto,bf16
    std::vector<std::string> twice = command;
    twice.insert(twice.end(), {"--dtype", "bf16", "--dtype", "auto"});
    expect_usage_error(twice, "--dtype");
  }
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace ssm
