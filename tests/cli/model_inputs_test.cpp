// What the commands make of the model and data they are given: a vocabulary
// that is not byte-level is never read as bytes, --holdout 0 does not crash
// score, the memory a model needs is reported as the load computes it, and
// info shows the weights as stored, dtype by dtype.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "ssm/tensor/convert.h"
#include "support/cli.h"
#include "support/compare.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::golden_dir;
using testing::run_ssm;

// A fresh model of `vocab` ids, without tokenizer.json; extra goes into config.json.
fs::path make_model(const testing::TempDir& dir, int vocab, const std::string& extra = "") {
  testing::write_bytes(dir / "config.json", R"({"d_model": 32, "n_layer": 1, "vocab_size": )" + std::to_string(vocab) +
                                                R"(, "pad_vocab_size_multiple": 8, "d_intermediate": 0,
      "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "chunk_size": 16}, "attn_layer_idx": [],
      "attn_cfg": {}, "tie_embeddings": true)" + extra + "}");
  const fs::path model = dir / "model";
  const testing::CliRun r = run_ssm({"init", "--config", (dir / "config.json").string(), "--out", model.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  return model;
}

TEST(ModelInputs, WideVocabularyWithoutTokenizerIsAnError) {
  testing::TempDir dir;
  const fs::path model = make_model(dir, 3000);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"generate", model.string(), "-p", "Hello", "-n", "3"},
           {"tokenize", model.string(), "--text", "Hello"},
           {"score", model.string(), "--data", (dir / "config.json").string(), "--all"}}) {
    const testing::CliRun r = run_ssm(args);
    EXPECT_EQ(r.code, 1) << args[0] << ": " << r.out;
    EXPECT_EQ(r.out, "") << args[0];
    EXPECT_TRUE(contains(r.err, "ssm: error: " + model.string() + ": no tokenizer.json")) << r.err;
    EXPECT_TRUE(contains(r.err, "3000")) << r.err;
  }
  // Ids in and ids out need no tokenizer.
  const testing::CliRun ids = run_ssm({"generate", model.string(), "--prompt-ids", "2999,5", "-n", "3",
                                       "--print-ids", "--ignore-eos"});
  EXPECT_EQ(ids.code, 0) << ids.err;
  EXPECT_EQ(ids.out.rfind("2999,5,", 0), 0u) << ids.out;
}

TEST(ModelInputs, ByteLevelWhenTheConfigSaysSo) {
  testing::TempDir small, marked;
  const fs::path bytes = make_model(small, 256);
  const fs::path wide = make_model(marked, 300, R"(, "tokenizer": "bytes")");
  for (const fs::path& model : {bytes, wide}) {
    const testing::CliRun r = run_ssm({"tokenize", model.string(), "--text", "hi"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "104,105\n");
  }
  // The key that marks it is known to the model's config reader too.
  const testing::CliRun gen = run_ssm({"generate", wide.string(), "-p", "hi", "-n", "2"});
  EXPECT_EQ(gen.code, 0) << gen.err;
  EXPECT_FALSE(contains(gen.err, "unknown key")) << gen.err;
}

TEST(ModelInputs, TokenizeOnAnEmptyDirectoryIsAnError) {
  testing::TempDir empty;
  const testing::CliRun r = run_ssm({"tokenize", empty.path().string(), "--text", "hi"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(contains(r.err, "no tokenizer.json and no config.json")) << r.err;
}

TEST(ModelInputs, TokenizeJsonHasIdsAndPieces) {
  const std::string tok = golden_dir("tokenizer");
  const std::string text = "Hello, world! Tokens and pieces.";
  const testing::CliRun plain = run_ssm({"tokenize", tok, "--text", text});
  const testing::CliRun json = run_ssm({"tokenize", tok, "--text", text, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  std::string ids, joined;
  for (const auto& id : doc["ids"]) ids += (ids.empty() ? "" : ",") + id.dump();
  for (const auto& piece : doc["tokens"]) joined += piece.get<std::string>();
  EXPECT_EQ(ids + "\n", plain.out);
  EXPECT_EQ(joined, text);
  EXPECT_EQ(doc["tokens"].size(), doc["ids"].size());
  const testing::CliRun decoded = run_ssm({"tokenize", tok, "--decode", "--text", ids, "--json"});
  EXPECT_EQ(nlohmann::json::parse(decoded.out)["text"], text);
}

TEST(ModelInputs, ScoreWithNoHoldoutNeedsAll) {
  const std::string m = golden_dir("mamba2_hf_tiny");
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a line of text to score, number " + std::to_string(i) + "\n";
  testing::write_bytes(dir / "data.txt", text);
  const testing::CliRun r = run_ssm({"score", m, "--data", (dir / "data.txt").string(), "--holdout", "0"});
  EXPECT_EQ(r.code, 2) << r.err;  // not 136, a floating-point exception
  EXPECT_TRUE(contains(r.err, "ssm: error: --holdout 0")) << r.err;
  EXPECT_TRUE(contains(r.err, "--all")) << r.err;
  const testing::CliRun all =
      run_ssm({"score", m, "--data", (dir / "data.txt").string(), "--holdout", "0", "--all", "--seq-len", "64"});
  EXPECT_EQ(all.code, 0) << all.err;
  const testing::CliRun json = run_ssm(
      {"score", m, "--data", (dir / "data.txt").string(), "--holdout", "0", "--all", "--seq-len", "64", "--json"});
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  char loss[64];
  std::snprintf(loss, sizeof loss, "loss:            %.6f nats/token", doc["loss"].get<double>());
  EXPECT_TRUE(contains(all.out, loss)) << all.out;
  EXPECT_EQ(doc["tokens"], 63 * (text.size() / 64));
}

TEST(ModelInputs, MemoryNeedIsWhatLoadingComputes) {
  const std::string m = golden_dir("hybrid_tiny");
  LanguageModel model(load_model_config(m + "/config.json"));
  const std::string need = format_bytes(model_memory_bytes(model));
  for (const std::string limit : {"1K", "300K"}) {
    const testing::CliRun r = run_ssm({"info", m, "--max-memory", limit});
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.err, "needs at least " + need + " ")) << r.err;
    EXPECT_TRUE(contains(r.err, "--max-memory")) << r.err;
    EXPECT_FALSE(contains(r.err, "LoadOptions")) << r.err;
  }
}

TEST(ModelInputs, InfoShowsStoredDtypesAndTheirMemory) {
  // A model with two tensors stored as BF16 and the rest as F32.
  const std::string src = golden_dir("mamba2_ssm_tiny");
  testing::TempDir dir;
  fs::copy_file(src + "/config.json", dir / "config.json");
  const SafetensorsFile golden = SafetensorsFile::open(src + "/model.safetensors");
  NamedTensors tensors;
  std::map<std::string, std::pair<int, uint64_t>> expected;
  for (const std::string& name : golden.names()) {
    Tensor t = golden.get(name).clone();
    if (name == "backbone.embedding.weight" || name == "backbone.layers.0.mixer.in_proj.weight") {
      Tensor bf = Tensor::empty(DType::kBF16, t.shape());
      f32_to_bf16(t.data<float>(), bf.raw(), t.numel());
      t = bf;
    }
    auto& [count, bytes] = expected[std::string(dtype_name(t.dtype()))];
    ++count;
    bytes += t.nbytes();
    tensors.emplace_back(name, t);
  }
  save_safetensors(dir / "model.safetensors", tensors);
  const testing::CliRun json = run_ssm({"info", dir.path().string(), "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  ASSERT_EQ(doc["stored"]["by_dtype"].size(), 2u) << json.out;
  for (const auto& [dtype, count_bytes] : expected) {
    EXPECT_EQ(doc["stored"]["by_dtype"][dtype]["tensors"], count_bytes.first) << dtype;
    EXPECT_EQ(doc["stored"]["by_dtype"][dtype]["bytes"], count_bytes.second) << dtype;
  }
  EXPECT_EQ(doc["stored"]["tensors"].size(), tensors.size());
  const testing::CliRun text = run_ssm({"info", dir.path().string(), "--tensors"});
  EXPECT_TRUE(contains(text.out, "BF16 2 tensors, " + format_bytes(expected["BF16"].second))) << text.out;
  EXPECT_TRUE(contains(text.out, "backbone.embedding.weight")) << text.out;
  EXPECT_EQ(doc["parameters"], LanguageModel::load(dir.path()).parameter_count());
}

}  // namespace
}  // namespace ssm
