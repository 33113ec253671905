// ssm init's streaming writer (write_initialized_model): the model it writes
// equals initialize_model's, a BF16 one equals the F32 one converted at load,
// in shards or not; writing it takes the memory of about one tensor, and a
// BF16 model loaded in BF16 computes from its mapped shards without a copy.
#include <gtest/gtest.h>

#include <cstring>

#include "ssm/train/init.h"
#include "support/mamba1_config.h"
#include "support/resident_memory.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;
using testing::kUnderAsan;
using testing::reset_peak;
using testing::status_bytes;

// A Mamba-1 in the HF convention: 24M parameters, 48 MB in BF16, the
// embedding (8192 x 512) its largest tensor.
const std::string kMamba1Config =
    testing::mamba1_hf_config({.hidden = 512, .layers = 12, .vocab = 8192});

ShardedWriteResult init_model(const fs::path& dir, DType dtype, uint64_t shard_bytes,
                              uint64_t seed = 7) {
  return write_initialized_model(kMamba1Config, "test config", dir, seed, dtype,
                                 {.shard_bytes = shard_bytes, .companions = {}, .check_stop = {}});
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Logits of one sequence of 12 ids.
Tensor logits(LanguageModel& model) {
  Tensor ids = Tensor::empty(DType::kI64, {1, 12});
  for (int64_t i = 0; i < 12; ++i) ids.data<int64_t>()[i] = (i * 677 + 5) % 8192;
  Context ctx("cpu", 2);
  return model.forward(ids, nullptr, ctx);
}

TEST(InitStreaming, StreamedF32EqualsInitializeModel) {
  testing::TempDir dir;
  const ShardedWriteResult r = init_model(dir.path(), DType::kF32, 16 << 20);
  EXPECT_GT(r.files.size(), 1u);
  LanguageModel loaded = LanguageModel::load(dir.path());
  LanguageModel fresh(load_model_config(dir / "config.json"));
  initialize_model(fresh, 7);
  std::map<std::string, Tensor> want;
  fresh.for_each_param([&](const std::string& name, Param& p) { want[name] = p.value; });
  loaded.for_each_param([&](const std::string& name, Param& p) {
    EXPECT_TRUE(same_bytes(p.value, want.at(name))) << name;
  });
}

// A model made in BF16 (several shards) equals the same seed made in F32
// (one file) and loaded with BF16 weights: every parameter and the logits.
TEST(InitStreaming, Bf16ModelEqualsF32ModelConvertedAtLoad) {
  testing::TempDir f32_dir, bf16_dir;
  init_model(f32_dir.path(), DType::kF32, uint64_t{1} << 30);
  const ShardedWriteResult r = init_model(bf16_dir.path(), DType::kBF16, 8 << 20);
  EXPECT_GE(r.files.size(), 4u);
  LanguageModel converted = LanguageModel::load(f32_dir.path(), {.weights = DType::kBF16});
  LanguageModel stored = LanguageModel::load(bf16_dir.path(), {.weights = DType::kBF16});
  std::map<std::string, Tensor> want;
  converted.for_each_param([&](const std::string& name, Param& p) { want[name] = p.value; });
  int bf16 = 0;
  stored.for_each_param([&](const std::string& name, Param& p) {
    EXPECT_TRUE(same_bytes(p.value, want.at(name))) << name;
    bf16 += p.value.dtype() == DType::kBF16;
  });
  EXPECT_EQ(bf16, 1 + 12 * 4);  // the embedding and each layer's in, x, dt and out projections
  EXPECT_TRUE(same_bytes(logits(stored), logits(converted)));
}

TEST(InitStreaming, WritingTakesTheMemoryOfAboutOneTensor) {
  if (kUnderAsan) GTEST_SKIP() << "resident memory is not measurable under AddressSanitizer";
  testing::TempDir dir;
  if (!reset_peak() || status_bytes("VmHWM") < 0)
    GTEST_SKIP() << "no /proc/self/clear_refs to reset VmHWM";
  const int64_t before = status_bytes("VmRSS");
  const ShardedWriteResult r = init_model(dir.path(), DType::kBF16, 8 << 20);
  const int64_t growth = status_bytes("VmHWM") - before;
  // The largest tensor, the embedding, drawn in F32 (16 MB) and rounded
  // (8 MB); the model is 48 MB in BF16, 96 MB drawn.
  const int64_t largest = 8192 * 512 * 6;
  EXPECT_LT(growth, largest + (8 << 20)) << "writing " << r.data_bytes << " bytes";
}

// Loaded with BF16 weights, the BF16 shards are computed from where they are
// mapped: loading reads no weight page, decoding brings each into memory once,
// and the peak stays within 1.1x the weights' bytes.
TEST(InitStreaming, Bf16ShardsAreUsedWhereMapped) {
  if (kUnderAsan) GTEST_SKIP() << "resident memory is not measurable under AddressSanitizer";
  testing::TempDir dir;
  const ShardedWriteResult r = init_model(dir.path(), DType::kBF16, 8 << 20);
  const auto weights = static_cast<int64_t>(r.data_bytes);
  if (!reset_peak() || status_bytes("VmHWM") < 0)
    GTEST_SKIP() << "no /proc/self/clear_refs to reset VmHWM";
  const int64_t before = status_bytes("VmRSS");
  LanguageModel model = LanguageModel::load(dir.path(), {.weights = DType::kBF16});
  const int64_t loading = status_bytes("VmHWM") - before;
  EXPECT_LT(loading, weights / 10) << "loading " << weights << " bytes of weights";
  Context ctx("cpu", 2);
  ModelState state = model.make_state(1);
  for (int64_t t = 0; t < 4; ++t) {
    const int64_t token = t * 31 + 1;
    model.step(&token, state, ctx);
  }
  const int64_t decoding = status_bytes("VmHWM") - before;
  EXPECT_GT(decoding, weights / 2) << "the weights were not read from the mapping?";
  EXPECT_LT(decoding, weights + weights / 10) << "decoding " << weights << " bytes of weights";
}

}  // namespace
}  // namespace ssm
