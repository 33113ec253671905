// Model configs and checkpoints: every malformed or inconsistent input is a
// clear ssm::Error naming the key, tensor or file; low-precision and sharded
// checkpoints load to the same model.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ssm/io/json.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "ssm/tensor/convert.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::golden_dir;
using testing::TempDir;

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Json golden_config(const std::string& name) {
  return load_json_file(golden_dir(name) + "/config.json");
}

// A copy of a golden model directory whose config and tensors can be edited.
struct EditableModel {
  TempDir dir;
  explicit EditableModel(const std::string& name) {
    fs::copy_file(golden_dir(name) + "/config.json", dir / "config.json");
    fs::copy_file(golden_dir(name) + "/model.safetensors", dir / "model.safetensors");
  }
  void set_config(const Json& j) { testing::write_bytes(dir / "config.json", j.dump()); }
  void set_tensors(const NamedTensors& t) { save_safetensors(dir / "model.safetensors", t); }
  NamedTensors tensors() const {
    const SafetensorsFile st = SafetensorsFile::open(dir / "model.safetensors");
    NamedTensors out;
    for (const auto& n : st.names()) out.emplace_back(n, st.get(n).clone());
    return out;
  }
};

TEST(ModelConfig, ParsesBothConventions) {
  const ModelConfig hf = parse_model_config(golden_config("mamba2_hf_tiny"), "hf");
  EXPECT_EQ(hf.convention, Convention::kHuggingFace);
  EXPECT_EQ(hf.mamba2.nheads(), 8);
  EXPECT_TRUE(std::isinf(hf.mamba2.dt_limit_hi));  // "Infinity" in the file
  const ModelConfig ss = parse_model_config(golden_config("mamba2_ssm_tiny"), "ss");
  EXPECT_EQ(ss.convention, Convention::kStateSpaces);
  EXPECT_EQ(ss.mamba2.ngroups, 2);
  EXPECT_EQ(ss.mamba2.conv_dim(), 128 + 2 * 2 * 16);
}

TEST(ModelConfig, AcceptsPythonJsonLiterals) {
  const Json j = parse_json(R"({"a": [Infinity, -Infinity, NaN], "s": "NaN Infinity"})", "t");
  EXPECT_TRUE(std::isinf(json_number(j["a"][0], "a")));
  EXPECT_LT(json_number(j["a"][1], "a"), 0);
  EXPECT_TRUE(std::isnan(json_number(j["a"][2], "a")));
  EXPECT_EQ(j["s"], "NaN Infinity");  // strings are left alone
}

TEST(ModelConfig, InconsistentValuesNameTheKey) {
  Json j = golden_config("mamba2_ssm_tiny");
  j["ssm_cfg"]["headdim"] = 48;  // d_inner 128 is not a multiple
  expect_error([&] { parse_model_config(j, "cfg"); }, "headdim");
  j = golden_config("mamba2_ssm_tiny");
  j.erase("d_model");
  expect_error([&] { parse_model_config(j, "cfg"); }, "'d_model'");
  j = golden_config("mamba2_ssm_tiny");
  j["n_layer"] = "two";
  expect_error([&] { parse_model_config(j, "cfg"); }, "'n_layer' must be an integer");
  j = golden_config("mamba2_ssm_tiny");
  j["ssm_cfg"]["layer"] = "Mamba7";
  expect_error([&] { parse_model_config(j, "cfg"); }, "Mamba7");
  j = golden_config("mamba2_hf_tiny");
  j["num_heads"] = 6;
  expect_error([&] { parse_model_config(j, "cfg"); }, "num_heads");
  j = golden_config("mamba2_ssm_tiny");
  j["attn_layer_idx"] = Json::array({5});
  expect_error([&] { parse_model_config(j, "cfg"); }, "attn_layer_idx");
}

TEST(ModelConfig, MalformedConfigFileNamesTheFile) {
  TempDir dir;
  testing::write_bytes(dir / "config.json", "{\"d_model\": 64,");
  expect_error([&] { load_model_config(dir / "config.json"); }, (dir / "config.json").string());
  expect_error([&] { load_model_config(dir / "absent.json"); }, "cannot open");
}

TEST(ModelLoading, MissingTensorIsNamed) {
  EditableModel m("mamba2_ssm_tiny");
  NamedTensors t = m.tensors();
  std::erase_if(t, [](const auto& p) { return p.first == "backbone.layers.1.mixer.dt_bias"; });
  m.set_tensors(t);
  expect_error([&] { LanguageModel::load(m.dir.path()); },
               "missing tensor 'backbone.layers.1.mixer.dt_bias'");
}

TEST(ModelLoading, WrongShapeIsNamed) {
  EditableModel m("mamba2_ssm_tiny");
  NamedTensors t = m.tensors();
  for (auto& [name, tensor] : t)
    if (name == "backbone.layers.0.mixer.D") tensor = Tensor::zeros(DType::kF32, {9});
  m.set_tensors(t);
  expect_error([&] { LanguageModel::load(m.dir.path()); }, "'backbone.layers.0.mixer.D' has shape [9]");
}

TEST(ModelLoading, ConfigThatDisagreesWithWeightsIsAnError) {
  EditableModel m("mamba2_ssm_tiny");
  Json j = golden_config("mamba2_ssm_tiny");
  j["ssm_cfg"]["d_state"] = 32;
  m.set_config(j);
  expect_error([&] { LanguageModel::load(m.dir.path()); }, "in_proj.weight' has shape");
}

TEST(ModelLoading, IntegerWeightIsAnError) {
  EditableModel m("mamba2_ssm_tiny");
  NamedTensors t = m.tensors();
  for (auto& [name, tensor] : t)
    if (name == "backbone.norm_f.weight") tensor = Tensor::zeros(DType::kI32, {64});
  m.set_tensors(t);
  expect_error([&] { LanguageModel::load(m.dir.path()); }, "integer dtype");
}

TEST(ModelLoading, TruncatedWeightsFileIsAnError) {
  EditableModel m("mamba2_ssm_tiny");
  fs::resize_file(m.dir / "model.safetensors", fs::file_size(m.dir / "model.safetensors") - 100);
  expect_error([&] { LanguageModel::load(m.dir.path()); }, "model.safetensors");
  fs::remove(m.dir / "model.safetensors");
  expect_error([&] { LanguageModel::load(m.dir.path()); }, "no weights found");
}

TEST(ModelLoading, TokenOutsideVocabularyIsAnError) {
  LanguageModel model = LanguageModel::load(golden_dir("mamba2_ssm_tiny"));
  Tensor ids = Tensor::zeros(DType::kI64, {1, 3});
  ids.data<int64_t>()[1] = 256;
  Context ctx(1);
  expect_error([&] { model.forward(ids, nullptr, ctx); }, "outside the vocabulary");
}

// Converts every weight to `dtype` and checks logits stay close to the F32
// model's (the error is the weights' rounding, not the loader's).
void expect_low_precision_loads(DType dtype, double tolerance) {
  EditableModel m("mamba2_hf_tiny");
  NamedTensors t = m.tensors();
  for (auto& [name, tensor] : t) {
    Tensor low = Tensor::empty(dtype, tensor.shape());
    if (dtype == DType::kBF16) f32_to_bf16(tensor.data<float>(), low.raw(), tensor.numel());
    else f32_to_f16(tensor.data<float>(), low.raw(), tensor.numel());
    tensor = low;
  }
  m.set_tensors(t);
  LanguageModel low = LanguageModel::load(m.dir.path());
  LanguageModel ref = LanguageModel::load(golden_dir("mamba2_hf_tiny"));
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir("mamba2_hf_tiny") + "/golden.safetensors");
  Context ctx(1);
  const Tensor ids = golden.get("input_ids").clone();
  const double err = testing::max_rel_error(low.forward(ids, nullptr, ctx), ref.forward(ids, nullptr, ctx));
  EXPECT_LE(err, tolerance);
  EXPECT_GT(err, 0.0);  // the weights really were rounded
}

TEST(ModelLoading, Bf16CheckpointLoads) { expect_low_precision_loads(DType::kBF16, 3e-2); }
TEST(ModelLoading, F16CheckpointLoads) { expect_low_precision_loads(DType::kF16, 5e-3); }

// The file a mapping of this process at `address` shows (/proc/self/maps),
// empty for anonymous memory.
std::string mapped_file_at(const void* address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(address);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || a < lo || a >= hi) continue;
    const size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

// A BF16 checkpoint run in BF16 (--dtype bf16) computes with the projection
// matrices where the file is mapped: no copy, no widening; the vectors
// (norms, conv, A, D) are widened to F32 as always.
TEST(ModelLoading, Bf16ProjectionsOfABf16CheckpointStayMapped) {
  EditableModel m("mamba2_hf_tiny");
  NamedTensors t = m.tensors();
  for (auto& [name, tensor] : t) {
    Tensor low = Tensor::empty(DType::kBF16, tensor.shape());
    f32_to_bf16(tensor.data<float>(), low.raw(), tensor.numel());
    tensor = low;
  }
  m.set_tensors(t);
  LanguageModel low = LanguageModel::load(m.dir.path(), {.weights = DType::kBF16});
  int64_t mapped = 0;
  low.for_each_param([&](const std::string& name, Param& p) {
    const bool projection = p.role == ParamRole::kWeight && p.shape.size() == 2;
    EXPECT_EQ(p.value.dtype(), projection ? DType::kBF16 : DType::kF32) << name;
    const std::string file = mapped_file_at(p.value.raw());
    if (projection) {
      EXPECT_TRUE(file.size() >= 17 && file.substr(file.size() - 17) == "model.safetensors")
          << name << " is not in the checkpoint's mapping: '" << file << "'";
      ++mapped;
    } else {
      EXPECT_EQ(file, "") << name << " should have been widened";
    }
  });
  EXPECT_GE(mapped, 3);  // the embedding and each layer's in_proj and out_proj

  // And it computes as the F32 model within BF16's rounding.
  LanguageModel ref = LanguageModel::load(golden_dir("mamba2_hf_tiny"));
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir("mamba2_hf_tiny") + "/golden.safetensors");
  Context ctx(1);
  const Tensor ids = golden.get("input_ids").clone();
  EXPECT_LE(testing::max_rel_error(low.forward(ids, nullptr, ctx), ref.forward(ids, nullptr, ctx)), 3e-2);
}

TEST(ModelLoading, ShardedCheckpointEqualsSingleFile) {
  EditableModel m("mamba2_ssm_tiny");
  const NamedTensors t = m.tensors();
  fs::remove(m.dir / "model.safetensors");
  NamedTensors a(t.begin(), t.begin() + t.size() / 2), b(t.begin() + t.size() / 2, t.end());
  save_safetensors(m.dir / "model-00001-of-00002.safetensors", a);
  save_safetensors(m.dir / "model-00002-of-00002.safetensors", b);
  Json index = {{"metadata", Json::object()}, {"weight_map", Json::object()}};
  for (const auto& [n, _] : a) index["weight_map"][n] = "model-00001-of-00002.safetensors";
  for (const auto& [n, _] : b) index["weight_map"][n] = "model-00002-of-00002.safetensors";
  testing::write_bytes(m.dir / "model.safetensors.index.json", index.dump());

  LanguageModel sharded = LanguageModel::load(m.dir.path());
  LanguageModel single = LanguageModel::load(golden_dir("mamba2_ssm_tiny"));
  const SafetensorsFile golden = SafetensorsFile::open(golden_dir("mamba2_ssm_tiny") + "/golden.safetensors");
  Context ctx(1);
  const Tensor ids = golden.get("input_ids").clone();
  EXPECT_EQ(testing::max_rel_error(sharded.forward(ids, nullptr, ctx), single.forward(ids, nullptr, ctx)), 0.0);

  // An index naming a tensor its shard lacks is an error naming the index.
  index["weight_map"]["backbone.norm_f.weight"] = "model-00001-of-00002.safetensors";
  testing::write_bytes(m.dir / "model.safetensors.index.json", index.dump());
  if (std::none_of(a.begin(), a.end(), [](const auto& p) { return p.first == "backbone.norm_f.weight"; }))
    expect_error([&] { LanguageModel::load(m.dir.path()); }, "is not in shard");
  index["weight_map"]["backbone.norm_f.weight"] = "../../etc/passwd";
  testing::write_bytes(m.dir / "model.safetensors.index.json", index.dump());
  expect_error([&] { LanguageModel::load(m.dir.path()); }, "plain file name");
}

}  // namespace
}  // namespace ssm
