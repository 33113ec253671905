// The golden Mamba-2 and Mamba-3 (SISO, MIMO) models on the GPU (label gpu):
// logits within the golden tolerance of the reference, decode steps equal to
// the prefill, and a state moved GPU -> CPU -> GPU bit-exactly (in memory
// and through a state file), continuing the same on both devices;
// hybrid_tiny (attention layers with their KV caches) likewise.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "ssm/model/state_file.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::host;
using testing::max_rel_error;

struct GoldenCase {
  const char* name;
  double tolerance;  // as the host golden tests (tests/model/golden_mamba{2,3}_test.cpp)
};

class GpuGolden : public ::testing::TestWithParam<GoldenCase> {
 protected:
  SafetensorsFile golden() const {
    return SafetensorsFile::open(testing::golden_dir(GetParam().name) + "/golden.safetensors");
  }
  LanguageModel gpu_model(Context& ctx) const {
    LanguageModel m = LanguageModel::load(testing::golden_dir(GetParam().name));
    m.to_device(ctx.device());
    return m;
  }
};

// Columns [t0, t1) of a host (B, L) id tensor.
Tensor id_slice(const Tensor& ids, int64_t t0, int64_t t1) { return ids.slice(1, t0, t1).clone(); }

TEST_P(GpuGolden, LogitsMatchReference) {
  Context ctx("cuda", 1);
  LanguageModel model = gpu_model(ctx);
  const SafetensorsFile g = golden();
  const Tensor logits = model.forward(g.get("input_ids").clone(), nullptr, ctx);
  EXPECT_EQ(logits.device(), ctx.device());
  const double err = max_rel_error(host(logits), g.get("logits"));
  RecordProperty("logits_rel_error", std::to_string(err));
  EXPECT_LE(err, GetParam().tolerance);
}

TEST_P(GpuGolden, StepLogitsEqualPrefillLogits) {
  Context ctx("cuda", 1);
  LanguageModel model = gpu_model(ctx);
  const Tensor ids = golden().get("input_ids").clone();
  const int64_t B = ids.dim(0), L = ids.dim(1), V = model.config().vocab_size;
  const Tensor prefill = host(model.forward(ids, nullptr, ctx));
  ModelState state = model.make_state(B);
  Tensor stepped = Tensor::empty(DType::kF32, {B, L, V});
  std::vector<int64_t> tok(B);
  for (int64_t t = 0; t < L; ++t) {
    for (int64_t b = 0; b < B; ++b) tok[b] = ids.data<int64_t>()[b * L + t];
    const Tensor logits = host(model.step(tok.data(), state, ctx));
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(logits.data<float>() + b * V, V, stepped.data<float>() + (b * L + t) * V);
  }
  EXPECT_EQ(state.position, L);
  EXPECT_LE(max_rel_error(stepped, prefill), 1e-4);
}

// A prefill, then enough decode steps that the step is recorded, replayed
// and, with KV caches, recorded again where a cache grows (16 rows, then
// 32, 64), then a prefill again: the steps and the last part equal one
// prefill of the whole, so the replays read each step's positions and the
// host's cache lengths follow them.
TEST_P(GpuGolden, ReplayedStepsContinueAsOnePrefill) {
  Context ctx("cuda", 1);
  LanguageModel model = gpu_model(ctx);
  const int64_t B = 2, L = 48, first = 5, last = 40, V = model.config().vocab_size;
  Tensor ids = Tensor::empty(DType::kI64, {B, L});
  for (int64_t i = 0; i < B * L; ++i) ids.data<int64_t>()[i] = (7 * i + 3) % V;
  const Tensor whole = host(model.forward(ids, nullptr, ctx));
  ModelState state = model.make_state(B);
  model.forward(id_slice(ids, 0, first), &state, ctx);
  Tensor stepped = Tensor::empty(DType::kF32, {B, last - first, V});
  std::vector<int64_t> tok(B);
  for (int64_t t = first; t < last; ++t) {
    for (int64_t b = 0; b < B; ++b) tok[b] = ids.data<int64_t>()[b * L + t];
    const Tensor logits = host(model.step(tok.data(), state, ctx));
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(logits.data<float>() + b * V, V, stepped.data<float>() + (b * (last - first) + t - first) * V);
  }
  EXPECT_LE(max_rel_error(stepped, whole.slice(1, first, last).clone()), 1e-4);
  const Tensor rest = host(model.forward(id_slice(ids, last, L), &state, ctx));
  EXPECT_LE(max_rel_error(rest, whole.slice(1, last, L).clone()), 1e-4);
}

// Every tensor of a state moved to `device` (the round trip a state file
// saved on one device and loaded on another makes), but a KV cache's
// lengths, which live on the host on every device (AttentionState).
void move_state(ModelState& s, Device device) {
  for (auto& layer : s.layers)
    if (layer)
      for (auto& [name, t] : layer->tensors())
        if (name != "lengths") *t = t->to(device);
}

bool same_bytes(ModelState& a, ModelState& b) {
  for (size_t i = 0; i < a.layers.size(); ++i) {
    if (!a.layers[i]) continue;
    auto ta = a.layers[i]->tensors(), tb = b.layers[i]->tensors();
    for (size_t j = 0; j < ta.size(); ++j) {
      const Tensor x = host(*ta[j].second).clone(), y = host(*tb[j].second).clone();
      if (!x.same_layout(y) || std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0) return false;
    }
  }
  return true;
}

TEST_P(GpuGolden, StateMovedGpuToCpuToGpuContinuesTheSame) {
  Context gpu("cuda", 1);
  LanguageModel model = gpu_model(gpu);
  const Tensor ids = golden().get("input_ids").clone();
  const int64_t B = ids.dim(0), L = ids.dim(1), split = L / 2;
  const Tensor whole = host(model.forward(ids, nullptr, gpu));

  ModelState kept = model.make_state(B), moved = model.make_state(B);
  model.forward(id_slice(ids, 0, split), &kept, gpu);
  model.forward(id_slice(ids, 0, split), &moved, gpu);
  move_state(moved, Device::host());
  // On the CPU: the host model continues from the moved state.
  LanguageModel cpu_model = LanguageModel::load(testing::golden_dir(GetParam().name));
  Context cpu("cpu", 2);
  ModelState on_cpu = cpu_model.make_state(B);
  for (size_t i = 0; i < on_cpu.layers.size(); ++i)
    if (on_cpu.layers[i]) {
      auto dst = on_cpu.layers[i]->tensors(), src = moved.layers[i]->tensors();
      for (size_t j = 0; j < dst.size(); ++j) *dst[j].second = src[j].second->clone();
    }
  on_cpu.position = moved.position;
  const Tensor cpu_rest = cpu_model.forward(id_slice(ids, split, L), &on_cpu, cpu);
  EXPECT_LE(max_rel_error(cpu_rest, whole.slice(1, split, L).clone()), 1e-4);

  move_state(moved, gpu.device());
  EXPECT_TRUE(same_bytes(kept, moved)) << "the round trip changed the state";
  const Tensor a = host(model.forward(id_slice(ids, split, L), &kept, gpu));
  const Tensor b = host(model.forward(id_slice(ids, split, L), &moved, gpu));
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "continuations differ";
  EXPECT_LE(max_rel_error(a, whole.slice(1, split, L).clone()), 1e-4);
}

// A session state file written from the GPU loads on the CPU (continuing as
// the whole text would) and back on the GPU (continuing bit-exactly): the
// fingerprint and the file do not depend on where the state lived.
TEST_P(GpuGolden, StateFileSavedOnGpuLoadsOnCpuAndGpu) {
  Context gpu("cuda", 1), cpu("cpu", 2);
  LanguageModel model = gpu_model(gpu);
  LanguageModel cpu_model = LanguageModel::load(testing::golden_dir(GetParam().name));
  ASSERT_EQ(model_fingerprint(model, gpu), model_fingerprint(cpu_model, cpu));
  const Tensor ids = golden().get("input_ids").clone();
  const int64_t B = ids.dim(0), L = ids.dim(1), split = L / 2;
  const Tensor whole = host(model.forward(ids, nullptr, gpu));

  SessionState kept = make_session(model, B);
  model.forward(id_slice(ids, 0, split), &kept.model, gpu);
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / (std::string(GetParam().name) + "_gpu.state");
  save_state(file, model, kept, gpu);

  SessionState on_cpu = load_state(file, cpu_model, cpu);
  const Tensor cpu_rest = cpu_model.forward(id_slice(ids, split, L), &on_cpu.model, cpu);
  EXPECT_LE(max_rel_error(cpu_rest, whole.slice(1, split, L).clone()), 1e-4);

  SessionState back = load_state(file, model, gpu);
  const Tensor a = host(model.forward(id_slice(ids, split, L), &kept.model, gpu));
  const Tensor b = host(model.forward(id_slice(ids, split, L), &back.model, gpu));
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "continuations differ";
  std::filesystem::remove(file);
}

INSTANTIATE_TEST_SUITE_P(Mamba2, GpuGolden,
                         ::testing::Values(GoldenCase{"mamba2_hf_tiny", 1e-4}, GoldenCase{"mamba2_ssm_tiny", 5e-4}),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Mamba3, GpuGolden,
                         ::testing::Values(GoldenCase{"mamba3_siso_tiny", 1e-4}, GoldenCase{"mamba3_mimo_tiny", 1e-4}),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Hybrid, GpuGolden, ::testing::Values(GoldenCase{"hybrid_tiny", 1e-4}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ssm
