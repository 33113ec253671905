// A BF16 SSM state (LanguageModel::set_state_dtype, --state-dtype bf16) on
// the GPU (label gpu), the golden tiny models: the cuda decode stays near
// the cpu backend's BF16-state decode and its own F32-state one; the state,
// moved GPU -> CPU -> GPU or saved to a state file on the GPU and loaded
// back, continues bit-exactly as the state left in place (through the
// recorded, replayed step); a prompt long enough for Mamba-3's time
// segments rounds its final state once, as the cpu backend does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ssm/model/language_model.h"
#include "ssm/model/state_file.h"
#include "support/backends.h"
#include "support/compare.h"
#include "support/state_decode.h"

namespace ssm {
namespace {

using testing::host;

const char* const kCases[] = {"mamba2_hf_tiny", "mamba2_ssm_tiny", "mamba3_siso_tiny", "mamba3_mimo_tiny",
                              "hybrid_tiny"};

using testing::decode;
using testing::drift;
using testing::prompt_ids;
using testing::prompted;
using testing::same_bits;

class GpuBf16State : public ::testing::TestWithParam<const char*> {
 protected:
  LanguageModel model(Context& ctx, DType state_dtype) const {
    LanguageModel m = LanguageModel::load(testing::golden_dir(GetParam()));
    m.to_device(ctx.device());
    m.set_state_dtype(state_dtype);
    return m;
  }
};

// 40 steps: recorded and replayed on cuda. The BF16 state rounds every
// step, so the cuda and cpu runs may part by a BF16 step where their F32
// sums differ in the last bit: the bound is the cpu test's for BF16 against
// F32 (tests/model/bf16_state_test.cpp, 2e-2: 5x the largest measured).
TEST_P(GpuBf16State, DecodeStaysNearTheCpuAndTheF32State) {
  Context gpu("cuda", 1), cpu("cpu", 2);
  LanguageModel g16 = model(gpu, DType::kBF16), c16 = model(cpu, DType::kBF16), g32 = model(gpu, DType::kF32);
  ModelState sg16 = prompted(g16, gpu), sc16 = prompted(c16, cpu), sg32 = prompted(g32, gpu);
  bool has_bf16 = false;
  for (auto& l : sg16.layers)
    if (l)
      for (auto& [name, t] : l->tensors()) has_bf16 |= t->dtype() == DType::kBF16 && !t->device().is_host();
  EXPECT_TRUE(has_bf16);
  const std::vector<Tensor> got = decode(g16, gpu, 40, sg16), cpu_bf16 = decode(c16, cpu, 40, sc16),
                            f32 = decode(g32, gpu, 40, sg32);
  const double to_cpu = drift(got, cpu_bf16), to_f32 = drift(got, f32);
  std::printf("[gpu bf16 state] %s: drift to the cpu's BF16 state %.3g, to the cuda F32 state %.3g\n",
              GetParam(), to_cpu, to_f32);
  EXPECT_LT(to_cpu, 2e-2);
  EXPECT_LT(to_f32, 2e-2);
  EXPECT_GT(to_f32, 0.0);  // the state really was rounded
}

// Moved to the host and back after 10 recorded steps, then 20 more (a
// recording of the moved tensors, replayed): the uninterrupted run's bits.
TEST_P(GpuBf16State, StateMovedGpuToCpuToGpuContinuesTheSame) {
  Context gpu("cuda", 1);
  LanguageModel m = model(gpu, DType::kBF16);
  ModelState whole = prompted(m, gpu);
  const std::vector<Tensor> want = decode(m, gpu, 30, whole);
  ModelState moved = prompted(m, gpu);
  decode(m, gpu, 10, moved);
  for (auto& layer : moved.layers)
    if (layer)
      for (auto& [name, t] : layer->tensors())
        if (name != "lengths") *t = t->to(Device::host()).to(gpu.device());
  const std::vector<Tensor> got = decode(m, gpu, 20, moved, 10);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(same_bits(got[i], want[10 + i])) << "step " << 10 + i;
}

// Saved from the GPU, loaded on the GPU and on the CPU: the GPU continues
// bit-exactly, the CPU near the GPU (as the decode test's bound).
TEST_P(GpuBf16State, StateFileSavedOnGpuLoadsOnGpuAndCpu) {
  Context gpu("cuda", 1), cpu("cpu", 2);
  LanguageModel m = model(gpu, DType::kBF16), c = model(cpu, DType::kBF16);
  SessionState kept = make_session(m, 2);
  kept.model = prompted(m, gpu);
  decode(m, gpu, 10, kept.model);
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / (std::string(GetParam()) + "_gpu_bf16.state");
  save_state(file, m, kept, gpu);
  SessionState back = load_state(file, m, gpu), on_cpu = load_state(file, c, cpu);
  const std::vector<Tensor> want = decode(m, gpu, 20, kept.model, 10), got = decode(m, gpu, 20, back.model, 10),
                            cpu_rest = decode(c, cpu, 20, on_cpu.model, 10);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << "step " << 10 + i;
  EXPECT_LT(drift(cpu_rest, want), 2e-2);
  std::filesystem::remove(file);
}

// A prompt from a fresh state: F32 throughout, the final state rounded
// once. Mamba-3's is longer than a time segment on cuda (2 x 33,000 rows
// against 65,536: sequence_segment_rows), whose segments carry the state
// in F32, widened and rounded through the host on a device. The logits are
// the F32 state's prompt's to the bit, the state its rounding.
TEST_P(GpuBf16State, PrefillRoundsTheFinalStateOnce) {
  Context gpu("cuda", 1);
  LanguageModel m32 = model(gpu, DType::kF32), m16 = model(gpu, DType::kBF16);
  const Tensor ids = prompt_ids(std::string(GetParam()).starts_with("mamba3") ? 33000 : 300);
  ModelState s32 = m32.make_state(2), s16 = m16.make_state(2);
  const Tensor want = host(m32.forward(ids, &s32, gpu, /*last_only=*/true));
  const Tensor got = host(m16.forward(ids, &s16, gpu, /*last_only=*/true));
  EXPECT_TRUE(same_bits(got, want));
  for (size_t i = 0; i < s32.layers.size(); ++i) {
    if (!s32.layers[i]) continue;
    auto a = s16.layers[i]->tensors(), b = s32.layers[i]->tensors();
    for (size_t j = 0; j < a.size(); ++j) {
      const bool rounded = a[j].second->dtype() == DType::kBF16;
      const Tensor wb = host(*b[j].second).clone();
      EXPECT_TRUE(same_bits(*a[j].second, rounded ? wb.to_dtype(DType::kBF16) : wb))
          << "layer " << i << " " << a[j].first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuBf16State, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace ssm
