// ssm convert SRC DST, run as a user would: the converted folder holds every
// tensor bit for bit (a tied head once, as the embedding), with its config
// and tokenizer, runs as the golden, and an existing model is kept unless
// --force.
#include <gtest/gtest.h>

#include <cstring>

#include "io/pytorch_fixtures.h"
#include "ssm/io/checkpoint.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::run_cli;
using testing::shell_quoted;
using testing::slurp;
using testing::TempDir;

// Every tensor of src appears in dst with the same dtype, shape and bytes,
// except a tied model's lm_head.weight, which is its embedding's bytes again;
// dst holds nothing else.
void expect_same_tensors(const std::filesystem::path& src_dir,
                         const std::filesystem::path& dst_file) {
  const std::unique_ptr<TensorSource> src = open_checkpoint(src_dir);
  const SafetensorsFile dst = SafetensorsFile::open(dst_file);
  const ModelConfig config = load_model_config(src_dir / "config.json");
  std::vector<std::string> src_names;
  for (const std::string& name : src->names()) {
    if (config.tie_embeddings && name == "lm_head.weight") {
      const Tensor head = *src->find(name), embedding = *src->find(config.embedding_name());
      EXPECT_TRUE(head.same_layout(embedding) && std::memcmp(head.raw(), embedding.raw(), head.nbytes()) == 0);
      continue;
    }
    src_names.push_back(name);
  }
  std::sort(src_names.begin(), src_names.end());
  EXPECT_EQ(src_names, dst.names());
  for (const std::string& name : src_names) {
    const Tensor a = *src->find(name);
    if (!dst.contains(name)) continue;
    const Tensor b = dst.get(name);
    EXPECT_TRUE(a.same_layout(b) && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0) << name;
  }
}

class ConvertGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvertGolden, PyTorchFolderConvertsBitForBit) {
  TempDir tmp;
  const std::filesystem::path dst = tmp / "made/by/convert";
  std::string out;
  ASSERT_EQ(
      run_cli("convert " + shell_quoted(golden_dir(GetParam())) + " " + shell_quoted(dst), &out), 0)
      << out;
  expect_same_tensors(golden_dir(GetParam()), dst / "model.safetensors");
  EXPECT_EQ(slurp(dst / "config.json"), slurp(golden_dir(GetParam()) + "/config.json"));
  EXPECT_FALSE(std::filesystem::exists(dst / "tokenizer.json"));
  EXPECT_EQ(SafetensorsFile::open(dst / "model.safetensors").metadata().at("format"), "pt");
}

TEST(Convert, TiedHeadIsWrittenOnce) {
  TempDir tmp;
  std::string out;
  ASSERT_EQ(run_cli("convert " + shell_quoted(golden_dir("mamba2_ssm_bin")) + " " + shell_quoted(tmp.path()), &out), 0)
      << out;
  const std::unique_ptr<TensorSource> src = open_checkpoint(golden_dir("mamba2_ssm_bin"));
  const SafetensorsFile dst = SafetensorsFile::open(tmp / "model.safetensors");
  const std::vector<std::string> names = src->names();
  ASSERT_NE(std::find(names.begin(), names.end(), "lm_head.weight"), names.end());
  EXPECT_EQ(dst.names().size(), names.size() - 1);
  EXPECT_FALSE(dst.contains("lm_head.weight"));
  size_t bytes = 0;
  for (const std::string& name : dst.names()) bytes += dst.get(name).nbytes();
  EXPECT_NE(out.find(std::to_string(dst.names().size()) + " tensors, " + std::to_string(bytes) + " bytes"),
            std::string::npos)
      << out;
}

TEST(Convert, ExistingModelIsKeptUnlessForced) {
  TempDir tmp;
  std::string out;
  const std::string args = shell_quoted(golden_dir("mamba2_ssm_bin")) + " " + shell_quoted(tmp.path());
  testing::spit(tmp / "model.safetensors", "the user's own model");
  EXPECT_EQ(run_cli("convert " + args, &out), 2);
  EXPECT_NE(out.find("ssm: error: DST_DIR " + tmp.path().string() + ": already holds model.safetensors"),
            std::string::npos)
      << out;
  EXPECT_EQ(slurp(tmp / "model.safetensors"), "the user's own model");
  EXPECT_FALSE(std::filesystem::exists(tmp / "config.json"));
  EXPECT_EQ(run_cli("convert --force " + args, &out), 0) << out;
  expect_same_tensors(golden_dir("mamba2_ssm_bin"), tmp / "model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvertGolden,
                         ::testing::Values("mamba2_ssm_bin", "mamba3_siso_bin"));

TEST(Convert, SafetensorsFolderWithTokenizerRoundTrips) {
  TempDir tmp;
  const std::filesystem::path src = tmp / "src", dst = tmp / "dst";
  std::filesystem::create_directories(src);
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(golden_dir("mamba2_hf_tiny") + "/" + f, src / f);
  std::filesystem::copy_file(golden_dir("tokenizer") + "/tokenizer.json", src / "tokenizer.json");
  std::string out;
  ASSERT_EQ(run_cli("convert " + shell_quoted(src) + " " + shell_quoted(dst), &out), 0) << out;
  expect_same_tensors(src, dst / "model.safetensors");
  EXPECT_EQ(slurp(dst / "tokenizer.json"), slurp(src / "tokenizer.json"));
  EXPECT_EQ(slurp(dst / "config.json"), slurp(src / "config.json"));
}

TEST(Convert, ConvertedFolderGivesTheGoldenLogits) {
  TempDir tmp;
  std::string out;
  ASSERT_EQ(run_cli("convert " + shell_quoted(golden_dir("mamba2_ssm_bin")) + " " +
                        shell_quoted(tmp.path()),
                    &out),
            0)
      << out;
  LanguageModel model = LanguageModel::load(tmp.path());
  const SafetensorsFile golden =
      SafetensorsFile::open(golden_dir("mamba2_ssm_bin") + "/golden.safetensors");
  Context ctx(2);
  const Tensor logits = model.forward(golden.get("input_ids").clone(), nullptr, ctx);
  EXPECT_LE(testing::max_rel_error(logits, golden.get("logits")), 5e-4);
}

// --dtype bf16 writes the projections as the load's conversion makes them
// (every other parameter F32); the copy loads as BF16 by default and gives
// the logits that loading the original with --dtype bf16 gives, bit for bit.
TEST(Convert, Bf16CopyLoadsAsTheOriginalConvertedOnLoad) {
  TempDir tmp;
  std::string out;
  const std::string src = golden_dir("mamba2_ssm_bin");
  ASSERT_EQ(run_cli("convert --dtype bf16 " + shell_quoted(src) + " " + shell_quoted(tmp.path()), &out), 0)
      << out;
  LanguageModel copy = LanguageModel::load(tmp.path(), LoadOptions{.weights = std::nullopt});
  LanguageModel original = LanguageModel::load(src, LoadOptions{.weights = DType::kBF16});
  EXPECT_EQ(copy.projection_dtype(), DType::kBF16);
  const SafetensorsFile file = SafetensorsFile::open(tmp / "model.safetensors");
  int bf16 = 0, f32 = 0;
  original.for_each_param([&](const std::string& name, Param& p) {
    ASSERT_TRUE(file.contains(name)) << name;
    const Tensor t = file.get(name);
    EXPECT_TRUE(t.same_layout(p.value) && std::memcmp(t.raw(), p.value.raw(), t.nbytes()) == 0) << name;
    (t.dtype() == DType::kBF16 ? bf16 : f32) += 1;
  });
  EXPECT_GT(bf16, 0);
  EXPECT_GT(f32, 0);
  const SafetensorsFile golden = SafetensorsFile::open(src + "/golden.safetensors");
  Context ctx(2);
  const Tensor a = copy.forward(golden.get("input_ids").clone(), nullptr, ctx);
  const Tensor b = original.forward(golden.get("input_ids").clone(), nullptr, ctx);
  EXPECT_EQ(testing::max_rel_error(a, b), 0.0);
  EXPECT_LE(testing::max_rel_error(a, golden.get("logits")), 5e-2);

  EXPECT_EQ(run_cli("convert --dtype int8 " + shell_quoted(src) + " " + shell_quoted(tmp / "q"), &out), 2);
  EXPECT_NE(out.find("--dtype"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(tmp / "q"));
}

TEST(Convert, FailuresExitNonZeroWithAMessage) {
  TempDir tmp;
  std::string out;
  EXPECT_EQ(
      run_cli("convert " + shell_quoted(tmp / "absent") + " " + shell_quoted(tmp / "dst"), &out),
      2);
  EXPECT_NE(out.find("ssm: error: SRC_DIR: "), std::string::npos) << out;
  EXPECT_NE(out.find("no such directory"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(tmp / "dst"));

  // A hostile archive: refused, nothing written, nothing run.
  std::filesystem::create_directories(tmp / "evil");
  std::filesystem::copy_file(golden_dir("mamba2_ssm_bin") + "/config.json",
                             tmp / "evil/config.json");
  testing::PickleWriter w;
  const std::filesystem::path marker = tmp / "pwned";
  w.proto().global("os", "system").str("touch " + marker.string()).op(0x85).op('R').op('.');
  testing::write_torch_archive(tmp / "evil/pytorch_model.bin", w.bytes(), {});
  EXPECT_EQ(
      run_cli("convert " + shell_quoted(tmp / "evil") + " " + shell_quoted(tmp / "dst"), &out), 1);
  EXPECT_NE(out.find("global 'os.system' is not allowed"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_FALSE(std::filesystem::exists(tmp / "dst"));
}

}  // namespace
}  // namespace ssm
