// The decode step through mamba2_decode_stack's kernel (label gpu):
// SSM_CUDA_PERSISTENT_DECODE=1 (one cooperative launch a step) and =2 (a
// launch a phase) decode the golden Mamba-2 models and random 3- and
// 4-layer ones (batch 1 and 3, F32 and BF16 projections) as the layers'
// own kernels do (F32: within 1e-5 relative), the same bits run to run,
// their steps equal the prefill, and the states they leave continue on
// the CPU as the whole prefill does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ssm/io/json.h"
#include "ssm/model/config.h"
#include "ssm/model/language_model.h"
#include "ssm/train/init.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::host;
using testing::max_rel_error;

struct StackModel {
  const char* name;
  int64_t batch;
  std::function<LanguageModel()> make;  // on the host
  double tolerance;                     // against the layers' own kernels
  // The state continued on the CPU against the GPU's prefill: BF16 weights
  // differ there by the CPU's BF16 products, which round the activations too.
  double cross_device = 1e-4;
};

LanguageModel golden(const char* name) { return LanguageModel::load(testing::golden_dir(name)); }

// mamba2_ssm_tiny's config made wider and deeper, initialised from a seed.
LanguageModel random_model(int layers, DType projections) {
  Json c = load_json_file(testing::golden_dir("mamba2_ssm_tiny") + "/config.json");
  c["n_layer"] = layers;
  c["d_model"] = 128;
  c["ssm_cfg"]["headdim"] = 32;
  c["ssm_cfg"]["d_state"] = 64;
  c["ssm_cfg"]["ngroups"] = 1;
  LanguageModel m(parse_model_config(c, "random stack"));
  initialize_model(m, 11);
  if (projections != DType::kF32) m.convert_projections(projections);
  return m;
}

// A context whose cuda resources read SSM_CUDA_PERSISTENT_DECODE = mode
// (null: unset, the layers' own kernels) when they are made.
std::unique_ptr<Context> cuda_context(const char* mode) {
  if (mode)
    ::setenv("SSM_CUDA_PERSISTENT_DECODE", mode, 1);
  else
    ::unsetenv("SSM_CUDA_PERSISTENT_DECODE");
  auto ctx = std::make_unique<Context>("cuda", 1);
  (void)ctx->resources();  // made now, while the variable says so
  ::unsetenv("SSM_CUDA_PERSISTENT_DECODE");
  return ctx;
}

// The ids (B, L) of a test: fixed, within the vocabulary.
Tensor test_ids(int64_t B, int64_t L, int64_t V) {
  Tensor ids = Tensor::empty(DType::kI64, {B, L});
  for (int64_t i = 0; i < B * L; ++i) ids.data<int64_t>()[i] = (i * 37 + 11) % V;
  return ids;
}

// Steps tokens [0, L) of ids through a fresh state on ctx: the logits (B,
// L, V) on the host; the state is left in *out when given.
Tensor decode(LanguageModel& model, Context& ctx, const Tensor& ids, ModelState* out = nullptr) {
  const int64_t B = ids.dim(0), L = ids.dim(1), V = model.config().vocab_size;
  ModelState state = model.make_state(B);
  Tensor logits = Tensor::empty(DType::kF32, {B, L, V});
  std::vector<int64_t> tok(static_cast<size_t>(B));
  for (int64_t t = 0; t < L; ++t) {
    for (int64_t b = 0; b < B; ++b) tok[b] = ids.data<int64_t>()[b * L + t];
    const Tensor step = host(model.step(tok.data(), state, ctx));
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(step.data<float>() + b * V, V, logits.data<float>() + (b * L + t) * V);
  }
  if (out) *out = std::move(state);
  return logits;
}

class DecodeStack : public ::testing::TestWithParam<StackModel> {};

TEST_P(DecodeStack, BothModesEqualTheLayersKernelsAndThePrefill) {
  const StackModel& m = GetParam();
  LanguageModel model = m.make();
  const std::unique_ptr<Context> plain = cuda_context(nullptr);
  model.to_device(plain->device());
  const Tensor ids = test_ids(m.batch, 12, model.config().vocab_size);
  const Tensor want = decode(model, *plain, ids);
  const Tensor prefill = host(model.forward(ids, nullptr, *plain));
  for (const char* mode : {"1", "2"}) {
    SCOPED_TRACE(std::string("SSM_CUDA_PERSISTENT_DECODE=") + mode);
    const std::unique_ptr<Context> ctx = cuda_context(mode);
    const Tensor got = decode(model, *ctx, ids), again = decode(model, *ctx, ids);
    EXPECT_LE(max_rel_error(got, want), m.tolerance);
    EXPECT_LE(max_rel_error(got, prefill), 1e-4);
    EXPECT_EQ(std::memcmp(got.raw(), again.raw(), got.nbytes()), 0) << "not deterministic";
  }
}

// The state the kernel leaves after half the ids, moved to the CPU, continues
// there as the GPU's prefill of the whole does.
TEST_P(DecodeStack, StateContinuesOnTheCpu) {
  const StackModel& m = GetParam();
  LanguageModel model = m.make(), cpu_model = m.make();
  const std::unique_ptr<Context> gpu = cuda_context("1");
  model.to_device(gpu->device());
  const int64_t L = 12, split = 7;
  const Tensor ids = test_ids(m.batch, L, model.config().vocab_size);
  const Tensor whole = host(model.forward(ids, nullptr, *gpu));
  ModelState state;
  decode(model, *gpu, ids.slice(1, 0, split).clone(), &state);
  Context cpu("cpu", 2);
  ModelState on_cpu = cpu_model.make_state(m.batch);
  for (size_t i = 0; i < on_cpu.layers.size(); ++i)
    if (on_cpu.layers[i]) {
      auto dst = on_cpu.layers[i]->tensors(), src = state.layers[i]->tensors();
      for (size_t j = 0; j < dst.size(); ++j) *dst[j].second = src[j].second->to(Device::host());
    }
  on_cpu.position = state.position;
  const Tensor rest = cpu_model.forward(ids.slice(1, split, L).clone(), &on_cpu, cpu);
  EXPECT_LE(max_rel_error(rest, whole.slice(1, split, L).clone()), m.cross_device);
}

INSTANTIATE_TEST_SUITE_P(
    Models, DecodeStack,
    ::testing::Values(
        StackModel{"mamba2_hf_tiny", 2, [] { return golden("mamba2_hf_tiny"); }, 1e-5},
        StackModel{"mamba2_ssm_tiny", 1, [] { return golden("mamba2_ssm_tiny"); }, 1e-5},
        StackModel{"random3_b1", 1, [] { return random_model(3, DType::kF32); }, 1e-5},
        StackModel{"random4_b3", 3, [] { return random_model(4, DType::kF32); }, 1e-5},
        StackModel{"random3_bf16_b8", 8, [] { return random_model(3, DType::kBF16); }, 1e-4, 2e-2}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ssm
