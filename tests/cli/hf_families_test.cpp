// The downloaded-checkpoint families through the program: `ssm info` names
// the family and the layer pattern the config implies; `ssm logits` equals
// transformers' logits; bad configs of these families fail naming the file
// and the key; a model with an inference-only layer refuses gradients
// naming that layer.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ssm/core/error.h"
#include "ssm/io/safetensors.h"
#include "support/cli.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::golden_dir;
using testing::run_ssm;

const std::vector<std::string> kFamilies = {"models/mamba1_hf", "models/falcon_mamba_hf",
                                            "models/bamba_hf", "models/nemotron_h_hf",
                                            "models/granite_hybrid_hf",
                                            "models/nemotron_h_moe_hf", "models/jamba_hf",
                                            "models/falcon_h1_hf", "models/zamba2_hf"};

nlohmann::json config_of(const std::string& c) {
  std::ifstream in(golden_dir(c) + "/config.json");
  return nlohmann::json::parse(in);
}

// The layer kinds as the config states them, in ssm info's words.
std::vector<std::string> expected_layers(const nlohmann::json& cfg) {
  const std::string type = cfg["model_type"];
  const int64_t n = type == "nemotron_h" ? static_cast<int64_t>(cfg["layers_block_type"].size())
                                         : cfg["num_hidden_layers"].get<int64_t>();
  std::vector<std::string> out;
  if (type == "mamba" || type == "falcon_mamba") return std::vector<std::string>(n, "mamba1");
  if (type == "falcon_h1") return std::vector<std::string>(n, "mamba2+attention");
  if (type == "zamba2") {
    for (const auto& t : cfg["layers_block_type"])
      out.push_back(t == "hybrid" ? "shared_attention+mamba2" : "mamba2");
    return out;
  }
  if (type == "jamba") {
    out.assign(n, "mamba1");
    for (int64_t i = cfg["attn_layer_offset"]; i < n; i += cfg["attn_layer_period"].get<int64_t>())
      out[i] = "attention";
    return out;
  }
  if (type == "nemotron_h" || type == "granitemoehybrid") {
    for (const auto& t : cfg[type == "nemotron_h" ? "layers_block_type" : "layer_types"]) {
      const std::string s = t;
      out.push_back(s == "linear_attention" ? "mamba2" : s == "full_attention" ? "attention" : s);
    }
    return out;
  }
  out.assign(n, "mamba2");
  for (const auto& i : cfg["attn_layer_indices"]) out[i.get<size_t>()] = "attention";
  return out;
}

TEST(HfFamiliesCli, InfoNamesTheFamilyAndTheLayerPattern) {
  for (const std::string& c : kFamilies) {
    SCOPED_TRACE(c);
    const nlohmann::json cfg = config_of(c);
    const testing::CliRun json = run_ssm({"info", golden_dir(c), "--json"});
    ASSERT_EQ(json.code, 0) << json.err;
    const nlohmann::json doc = nlohmann::json::parse(json.out);
    EXPECT_EQ(doc["family"], cfg["model_type"]);
    EXPECT_EQ(doc["layers"].get<std::vector<std::string>>(), expected_layers(cfg));
    const testing::CliRun text = run_ssm({"info", golden_dir(c)});
    ASSERT_EQ(text.code, 0) << text.err;
    EXPECT_TRUE(contains(text.out, "family:      " + cfg["model_type"].get<std::string>())) << text.out;
  }
}

TEST(HfFamiliesCli, LogitsCommandMatchesTransformers) {
  testing::TempDir dir;
  for (const std::string& c : kFamilies) {
    SCOPED_TRACE(c);
    const std::string golden = golden_dir(c) + "/golden.safetensors";
    const testing::CliRun r = run_ssm({"logits", golden_dir(c), "--input", golden, "--output",
                                       (dir / "out.safetensors").string(), "-t", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    const SafetensorsFile out = SafetensorsFile::open(dir / "out.safetensors");
    const SafetensorsFile ref = SafetensorsFile::open(golden);
    EXPECT_LE(testing::max_rel_error(out.get("logits"), ref.get("logits")), 1e-4);
  }
}

// A copy of a golden model whose config.json has `edit` applied.
fs::path edited_copy(const testing::TempDir& dir, const std::string& c,
                     const std::function<void(nlohmann::json&)>& edit) {
  const fs::path to = dir / "model";
  fs::remove_all(to);
  fs::create_directories(to);
  fs::copy_file(golden_dir(c) + "/model.safetensors", to / "model.safetensors");
  nlohmann::json cfg = config_of(c);
  edit(cfg);
  std::ofstream(to / "config.json") << cfg.dump();
  return to;
}

TEST(HfFamiliesCli, BadConfigsNameTheFileAndTheKey) {
  testing::TempDir dir;
  struct Case {
    std::string family, key, message;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Case> cases = {
      {"models/mamba1_hf", "time_step_rank", "time_step_rank", [](auto& j) { j["time_step_rank"] = "wide"; }},
      {"models/mamba1_hf", "hidden_act", "hidden_act", [](auto& j) { j["hidden_act"] = "gelu"; }},
      {"models/mamba1_hf", "state_size", "state_size", [](auto& j) { j["state_size"] = -3; }},
      {"models/bamba_hf", "attn_layer_indices", "attn_layer_indices", [](auto& j) { j["attn_layer_indices"] = {9}; }},
      {"models/bamba_hf", "mamba_n_heads", "mamba_n_heads", [](auto& j) { j["mamba_n_heads"] = 5; }},
      {"models/bamba_hf", "partial_rotary_factor", "partial_rotary_factor",
       [](auto& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.5; }},
      {"models/nemotron_h_hf", "num_hidden_layers", "5 layer types for num_hidden_layers 7",
       [](auto& j) { j["num_hidden_layers"] = 7; }},
      {"models/nemotron_h_hf", "layers_block_type", "unknown layer type 'conv'",
       [](auto& j) { j["layers_block_type"][1] = "conv"; }},
      {"models/nemotron_h_hf", "mlp_hidden_act", "mlp_hidden_act", [](auto& j) { j["mlp_hidden_act"] = "gelu"; }},
      {"models/nemotron_h_moe_hf", "n_routed_experts", "n_routed_experts", [](auto& j) { j["n_routed_experts"] = "8"; }},
      {"models/nemotron_h_moe_hf", "n_routed_experts", "n_routed_experts", [](auto& j) { j.erase("n_routed_experts"); }},
      {"models/nemotron_h_moe_hf", "num_experts_per_tok", "num_experts_per_tok (9) exceeds n_routed_experts (8)",
       [](auto& j) { j["num_experts_per_tok"] = 9; }},
      {"models/nemotron_h_moe_hf", "n_group", "n_group (3) does not divide n_routed_experts", [](auto& j) { j["n_group"] = 3; }},
      {"models/nemotron_h_moe_hf", "topk_group", "topk_group (2) exceeds n_group (1)", [](auto& j) { j["topk_group"] = 2; }},
      {"models/nemotron_h_moe_hf", "n_group", "groups hold fewer than num_experts_per_tok",
       [](auto& j) { j["n_group"] = 4, j["topk_group"] = 1, j["num_experts_per_tok"] = 3; }},
      {"models/nemotron_h_moe_hf", "routed_scaling_factor", "routed_scaling_factor",
       [](auto& j) { j["routed_scaling_factor"] = -1.0; }},
      {"models/nemotron_h_moe_hf", "norm_topk_prob", "norm_topk_prob", [](auto& j) { j["norm_topk_prob"] = 1; }},
      {"models/nemotron_h_moe_hf", "moe_latent_size", "moe_latent_size", [](auto& j) { j["moe_latent_size"] = 16; }},
      {"models/nemotron_h_moe_hf", "moe_intermediate_size", "moe_intermediate_size",
       [](auto& j) { j["moe_intermediate_size"] = 0; }},
      {"models/jamba_hf", "attn_layer_offset", "attn_layer_offset (4) must be in [0, attn_layer_period = 4)",
       [](auto& j) { j["attn_layer_offset"] = 4; }},
      {"models/jamba_hf", "expert_layer_period", "expert_layer_period", [](auto& j) { j["expert_layer_period"] = 0; }},
      {"models/jamba_hf", "expert_layer_offset", "expert_layer_offset", [](auto& j) { j["expert_layer_offset"] = -1; }},
      {"models/jamba_hf", "num_experts_per_tok", "num_experts_per_tok (5) exceeds num_experts (4)",
       [](auto& j) { j["num_experts_per_tok"] = 5; }},
      {"models/jamba_hf", "num_experts", "num_experts", [](auto& j) { j["num_experts"] = 2.5; }},
      {"models/jamba_hf", "mamba_dt_rank", "mamba_dt_rank", [](auto& j) { j["mamba_dt_rank"] = "wide"; }},
      {"models/jamba_hf", "num_key_value_heads", "num_key_value_heads", [](auto& j) { j["num_key_value_heads"] = 3; }},
      {"models/jamba_hf", "hidden_act", "hidden_act", [](auto& j) { j["hidden_act"] = "gelu"; }},
      {"models/jamba_hf", "mamba_d_state", "mamba_d_state", [](auto& j) { j["mamba_d_state"] = true; }},
      {"models/falcon_h1_hf", "ssm_multipliers", "ssm_multipliers must be a list of 5 numbers",
       [](auto& j) { j["ssm_multipliers"] = {1.0, 2.0}; }},
      {"models/falcon_h1_hf", "mlp_multipliers", "mlp_multipliers", [](auto& j) { j["mlp_multipliers"] = "big"; }},
      {"models/falcon_h1_hf", "lm_head_multiplier", "lm_head_multiplier must be positive",
       [](auto& j) { j["lm_head_multiplier"] = 0.0; }},
      {"models/falcon_h1_hf", "mamba_n_heads", "mamba_n_heads", [](auto& j) { j["mamba_n_heads"] = 5; }},
      {"models/falcon_h1_hf", "projectors_bias", "projectors_bias", [](auto& j) { j["projectors_bias"] = true; }},
      {"models/zamba2_hf", "layers_block_type", "unknown layer type 'conv'",
       [](auto& j) { j["layers_block_type"][1] = "conv"; }},
      {"models/zamba2_hf", "layers_block_type", "layers_block_type must list num_hidden_layers (5)",
       [](auto& j) { j["num_hidden_layers"] = 5; }},
      {"models/zamba2_hf", "hidden_act", "hidden_act", [](auto& j) { j["hidden_act"] = "silu"; }},
      {"models/zamba2_hf", "n_mamba_heads", "n_mamba_heads", [](auto& j) { j["n_mamba_heads"] = 7; }},
      {"models/zamba2_hf", "attention_head_dim", "attention_head_dim", [](auto& j) { j["attention_head_dim"] = 16; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.family + " " + c.key);
    const fs::path m = edited_copy(dir, c.family, c.edit);
    const testing::CliRun r = run_ssm({"info", m.string()});
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "config.json")) << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << r.err;
  }
}

std::string joined(const Tensor& ids, int64_t from, int64_t to) {
  std::string s;
  for (int64_t i = from; i < to; ++i) s += cat(s.empty() ? "" : ",", ids.data<int64_t>()[i]);
  return s;
}

// Greedy generation through the program reproduces HF's, and the end-of-text
// ids of generation_config.json (one id or a list) stop it, as HF's do.
TEST(HfFamiliesCli, GreedyGenerationAndGenerationConfigEos) {
  const std::string c = "models/mamba1_hf";
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir(c) + "/golden.safetensors");
  const Tensor prompt = golden.get("gen_prompt").clone(), out = golden.get("gen_output").clone();
  const int64_t P = prompt.numel(), N = out.numel();
  const std::vector<std::string> args = {"--prompt-ids", joined(prompt, 0, P), "--temperature", "0",
                                         "--print-ids", "-q", "-n", std::to_string(N - P)};
  auto generate = [&](const std::string& model) {
    std::vector<std::string> a = {"generate", model};
    a.insert(a.end(), args.begin(), args.end());
    return run_ssm(a);
  };
  const testing::CliRun whole = generate(golden_dir(c));
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(whole.out, joined(out, 0, N) + "\n");

  testing::TempDir dir;
  const int64_t stop_at = P + 4;  // the 5th generated token ends the text
  const int64_t eos = out.data<int64_t>()[stop_at];
  int64_t first = P;
  while (out.data<int64_t>()[first] != eos) ++first;  // it may come earlier
  for (const nlohmann::json& value : {nlohmann::json(eos), nlohmann::json::array({255, eos})}) {
    SCOPED_TRACE(value.dump());
    const fs::path m = edited_copy(dir, c, [](nlohmann::json&) {});
    std::ofstream(m / "generation_config.json") << nlohmann::json{{"eos_token_id", value}}.dump();
    const testing::CliRun r = generate(m.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, joined(out, 0, first + 1) + "\n");
  }
  const fs::path bad = edited_copy(dir, c, [](nlohmann::json&) {});
  std::ofstream(bad / "generation_config.json") << R"({"eos_token_id": "two"})";
  const testing::CliRun r = generate(bad.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "generation_config.json")) << r.err;
  EXPECT_TRUE(contains(r.err, "eos_token_id")) << r.err;
}

// `ssm init` makes a fresh model from these families' configs (the bench
// configs of bench/configs are HF ones too) that the program then runs.
TEST(HfFamiliesCli, InitMakesAModelFromTheirConfigs) {
  testing::TempDir dir;
  for (const std::string c : {"models/mamba1_hf", "models/bamba_hf", "models/granite_hybrid_hf",
                              "models/nemotron_h_hf"}) {
    SCOPED_TRACE(c);
    const fs::path out = dir / "init";
    const testing::CliRun r = run_ssm({"init", "--config", golden_dir(c) + "/config.json", "--out", out.string(),
                                       "--force"});
    ASSERT_EQ(r.code, 0) << r.err;
    const testing::CliRun logits = run_ssm({"logits", out.string(), "--input", golden_dir(c) + "/golden.safetensors",
                                            "--output", (dir / "out.safetensors").string()});
    ASSERT_EQ(logits.code, 0) << logits.err;
    const Tensor l = SafetensorsFile::open(dir / "out.safetensors").get("logits").clone();
    for (int64_t i = 0; i < l.numel(); ++i) ASSERT_TRUE(std::isfinite(l.data<float>()[i])) << i;
  }
}

// `ssm grad` takes every family (the gradients themselves are checked
// against finite differences in tests/train/hf_families_grad_test.cpp):
// gradients, all finite, and the loss `score` gives.
TEST(HfFamiliesCli, GradCommandTakesEveryFamily) {
  testing::TempDir dir;
  for (const std::string c : {"models/mamba1_hf", "models/falcon_mamba_hf", "models/bamba_hf",
                              "models/granite_hybrid_hf", "models/nemotron_h_hf", "models/nemotron_h_moe_hf",
                              "models/falcon_h1_hf", "models/jamba_hf", "models/zamba2_hf"}) {
    SCOPED_TRACE(c);
    const fs::path out = dir / "g.safetensors";
    const testing::CliRun r = run_ssm({"grad", golden_dir(c), "--input", golden_dir(c) + "/golden.safetensors",
                                       "--output", out.string()});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const SafetensorsFile g = SafetensorsFile::open(out);
    ASSERT_GT(g.names().size(), 5u);
    for (const std::string& name : g.names()) {
      const Tensor t = g.get(name).to_f32();
      for (int64_t i = 0; i < t.numel(); ++i) ASSERT_TRUE(std::isfinite(t.data<float>()[i])) << name;
    }
    const testing::CliRun score = run_ssm({"score", golden_dir(c), "--input", golden_dir(c) + "/golden.safetensors"});
    ASSERT_EQ(score.code, 0) << score.err;
    const size_t at = score.out.find("mean loss:");
    ASSERT_NE(at, std::string::npos) << score.out;
    const double loss = g.get("loss").to_f32().data<float>()[0];
    EXPECT_NEAR(std::stod(score.out.substr(at + 10)), loss, 2e-5 * loss);
    fs::remove(out);
  }
}

}  // namespace
}  // namespace ssm
