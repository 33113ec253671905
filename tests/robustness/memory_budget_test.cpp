// Memory limits: sizes as people write them, the lower bound from a config
// against the exact figure of the built model, and models refused by
// LanguageModel::load and by the --max-memory flag with a clear message.
#include <gtest/gtest.h>

#include <filesystem>

#include "process.h"
#include "ssm/io/atomic_file.h"
#include "ssm/model/language_model.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace ssm::testing {
namespace {

namespace fs = std::filesystem;

TEST(MemoryBudget, ParsesSizes) {
  EXPECT_EQ(parse_memory_size("2G"), uint64_t{2} << 30);
  EXPECT_EQ(parse_memory_size("2g"), uint64_t{2} << 30);
  EXPECT_EQ(parse_memory_size("512M"), uint64_t{512} << 20);
  EXPECT_EQ(parse_memory_size("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(parse_memory_size("64KB"), uint64_t{64} << 10);
  EXPECT_EQ(parse_memory_size("1.5G"), uint64_t{3} << 29);
  EXPECT_EQ(parse_memory_size("1T"), uint64_t{1} << 40);
  EXPECT_EQ(parse_memory_size("300000"), 300000u);
  EXPECT_EQ(parse_memory_size("100B"), 100u);
  for (const char* bad : {"", "G", "0", "0.1", "-1G", "2X", "2GG", "1..5G", "1e9", "20000000T", " 2G"})
    EXPECT_THROW(parse_memory_size(bad), Error) << bad;
}

TEST(MemoryBudget, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(uint64_t{3} << 29), "1.50 GiB");
}

TEST(MemoryBudget, DefaultLimitIsPhysicalMemory) {
  EXPECT_GT(physical_memory_bytes(), uint64_t{1} << 20);
  EXPECT_EQ(memory_limit(LoadOptions{}), physical_memory_bytes());
  EXPECT_EQ(memory_limit(LoadOptions{12345}), 12345u);
}

// The bound from the config never exceeds what the built model needs, for
// every architecture in the goldens.
TEST(MemoryBudget, LowerBoundFromConfigHolds) {
  for (const char* name : {"mamba2_ssm_tiny", "mamba2_hf_tiny", "mamba3_siso_tiny", "mamba3_mimo_tiny", "hybrid_tiny"}) {
    LanguageModel model(load_model_config(golden_dir(name) + "/config.json"));
    const uint64_t exact = model_memory_bytes(model);
    EXPECT_EQ(exact, static_cast<uint64_t>(model.parameter_count()) * 4 +
                         static_cast<uint64_t>(model.n_layer()) * kLayerOverheadBytes)
        << name;
    EXPECT_LE(min_model_bytes(model.config()), exact) << name;
    const ModelConfig& c = model.config();
    EXPECT_GE(min_model_bytes(c), static_cast<uint64_t>(c.vocab_size * c.d_model * 4 +
                                                        c.n_layer * static_cast<int64_t>(kLayerOverheadBytes)))
        << name;
  }
}

TEST(MemoryBudget, LoadRefusesAModelOverTheLimit) {
  const std::string dir = golden_dir("mamba2_ssm_tiny");
  LanguageModel model(load_model_config(dir + "/config.json"));
  const uint64_t need = model_memory_bytes(model);
  EXPECT_NO_THROW(LanguageModel::load(dir, LoadOptions{need}));
  try {
    LanguageModel::load(dir, LoadOptions{need - 1});
    ADD_FAILURE() << "loaded over the limit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(dir), std::string::npos) << m;
    EXPECT_NE(m.find("memory limit"), std::string::npos) << m;
    EXPECT_NE(m.find("--max-memory"), std::string::npos) << m;
  }
}

// A model loaded with 16- or 8-bit projections is budgeted at what it then
// holds, not at F32: a limit between the two loads it in BF16 and refuses
// it in F32.
TEST(MemoryBudget, LowPrecisionProjectionsAreBudgetedAtTheirSize) {
  const std::string dir = golden_dir("mamba2_ssm_tiny");
  LanguageModel shapes(load_model_config(dir + "/config.json"));
  const uint64_t f32 = model_memory_bytes(shapes);
  for (const DType dtype : {DType::kBF16, DType::kF16, DType::kQ8}) {
    SCOPED_TRACE(dtype_name(dtype));
    const uint64_t need = model_memory_bytes(shapes, dtype);
    ASSERT_LT(need, f32);
    LanguageModel loaded = LanguageModel::load(dir, LoadOptions{need, dtype});
    uint64_t held = static_cast<uint64_t>(loaded.n_layer()) * kLayerOverheadBytes;
    loaded.for_each_param([&](const std::string&, Param& p) {
      held += p.value.nbytes() + (p.value.dtype() == DType::kQ8 ? p.value.scales().nbytes() : 0);
    });
    EXPECT_EQ(held, need);
    EXPECT_THROW(LanguageModel::load(dir, LoadOptions{need, DType::kF32}), Error);
  }
}

int run_cli(const std::vector<std::string>& args, std::string& output) {
  TempDir dir;
  std::vector<std::string> argv = {SSM_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  const int code = reap(spawn_program(argv, (dir / "out").string()));
  output = read_file(dir / "out");
  return code;
}

TEST(MemoryBudget, CommandLineFlag) {
  const std::string model = golden_dir("mamba2_ssm_tiny");
  std::string out;
  EXPECT_EQ(run_cli({"info", model, "--max-memory", "100K"}, out), 1);
  EXPECT_NE(out.find("memory limit is 100.00 KiB"), std::string::npos) << out;
  EXPECT_EQ(run_cli({"info", model, "--max-memory", "1G"}, out), 0) << out;
  EXPECT_NE(run_cli({"info", model, "--max-memory", "lots"}, out), 0);
  EXPECT_NE(out.find("--max-memory"), std::string::npos) << out;
  TempDir dir;
  EXPECT_EQ(run_cli({"logits", model, "--input", golden_dir("mamba2_ssm_tiny") + "/golden.safetensors",
                     "--output", (dir / "l.safetensors").string(), "--max-memory", "64K"},
                    out),
            1);
  EXPECT_NE(out.find("memory limit"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "l.safetensors"));
}

}  // namespace
}  // namespace ssm::testing
