// Loading an F32 checkpoint into 16- or 8-bit projections keeps the F32
// weights out of memory: the conversion goes tensor by tensor and releases
// the pages of each F32 tensor it has read. The peak resident memory of the
// load (VmHWM, reset just before it) is compared with the F32 bytes: with the
// F32 mapping left resident it grows by all of them plus the converted copy.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "ssm/io/json.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "support/resident_memory.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

// A Mamba-2 of about 100 MB of F32 weights (the embedding, 16 MB, is
// converted in two blocks of rows) with small random values, its
// projections' F32 bytes in *projection_bytes.
void write_model(const std::filesystem::path& dir, int64_t* projection_bytes) {
  const Json config = Json::parse(R"({"d_model": 512, "n_layer": 12, "vocab_size": 8192,
    "ssm_cfg": {"layer": "Mamba2", "d_state": 64, "headdim": 64, "expand": 2},
    "rms_norm": true, "residual_in_fp32": true, "fused_add_norm": true, "tie_embeddings": true})");
  testing::write_bytes(dir / "config.json", config.dump());
  LanguageModel model(parse_model_config(config, "test config"));
  NamedTensors tensors;
  uint32_t seed = 12345;
  *projection_bytes = 0;
  model.for_each_param([&](const std::string& name, Param& p) {
    Tensor t = Tensor::empty(DType::kF32, p.shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      seed = seed * 1664525u + 1013904223u;
      t.data<float>()[i] = (static_cast<float>(seed >> 8) / 16777216.f - 0.5f) * 0.1f;
    }
    if (p.role == ParamRole::kWeight && p.shape.size() == 2)
      *projection_bytes += static_cast<int64_t>(t.nbytes());
    tensors.emplace_back(name, std::move(t));
  });
  save_safetensors(dir / "model.safetensors", tensors);
}

using testing::kUnderAsan;
using testing::reset_peak;
using testing::status_bytes;

class LoadMemory : public ::testing::TestWithParam<DType> {};

TEST_P(LoadMemory, ConvertedLoadDoesNotKeepTheF32Weights) {
  if (kUnderAsan) GTEST_SKIP() << "resident memory is not measurable under AddressSanitizer";
  const DType dtype = GetParam();
  testing::TempDir dir;
  int64_t f32_bytes = 0;
  write_model(dir.path(), &f32_bytes);
  if (!reset_peak() || status_bytes("VmHWM") < 0)
    GTEST_SKIP() << "no /proc/self/clear_refs to reset VmHWM";
  const int64_t before = status_bytes("VmRSS");
  int64_t converted_bytes = 0;
  {
    LanguageModel model = LanguageModel::load(dir.path(), {.weights = dtype});
    model.for_each_param([&](const std::string&, Param& p) {
      if (p.value.dtype() == dtype) converted_bytes += static_cast<int64_t>(p.value.nbytes());
    });
  }
  const int64_t growth = status_bytes("VmHWM") - before;
  ASSERT_GT(converted_bytes, 0);
  // With the F32 pages resident the growth is f32_bytes + converted_bytes
  // (at least f32_bytes, however the allocator reuses memory); released, it
  // is the converted weights plus one block of rows and small ones.
  EXPECT_LT(growth, converted_bytes + f32_bytes / 3)
      << "peak grew by " << growth << " bytes loading " << f32_bytes << " F32 bytes into "
      << converted_bytes << " bytes of " << dtype_name(dtype);
}

// Converted a block of rows at a time, the weights equal those of the whole
// F32 tensor converted at once (Q8's scales are per row).
TEST_P(LoadMemory, BlockwiseConversionEqualsWholeTensor) {
  const DType dtype = GetParam();
  testing::TempDir dir;
  int64_t f32_bytes = 0;
  write_model(dir.path(), &f32_bytes);
  LanguageModel f32 = LanguageModel::load(dir.path());
  LanguageModel low = LanguageModel::load(dir.path(), {.weights = dtype});
  std::map<std::string, Tensor> expected;
  f32.for_each_param([&](const std::string& name, Param& p) {
    if (p.role == ParamRole::kWeight && p.shape.size() == 2)
      expected[name] = p.value.to_dtype(dtype);
  });
  int checked = 0;
  low.for_each_param([&](const std::string& name, Param& p) {
    if (!expected.count(name)) return;
    const Tensor& e = expected.at(name);
    ASSERT_EQ(p.value.dtype(), dtype) << name;
    EXPECT_EQ(std::memcmp(p.value.raw(), e.raw(), e.nbytes()), 0) << name;
    if (dtype == DType::kQ8) {
      EXPECT_EQ(std::memcmp(p.value.scales().raw(), e.scales().raw(), e.scales().nbytes()), 0)
          << name;
    }
    ++checked;
  });
  EXPECT_EQ(checked, static_cast<int>(expected.size()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LoadMemory, ::testing::Values(DType::kBF16, DType::kQ8),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace ssm
