// GPU throughput of 130m-shaped models (d_model 768, 24 layers, d_state
// 128, headdim 64, vocabulary 50288; random weights as `ssm init` makes
// them, projections in BF16) on the cuda backend: prefill (batch 8 x 2048,
// 1 x 2048) and decode (batch 1, 8, 64) tokens/s, each with its fraction of
// the bound measured in the same run: the bf16 tensor-core rate (an
// 8192^3 cuBLAS product) for prefill, the HBM bandwidth (a device copy) for
// decode. Written as a program so that it can become
// `ssm bench MODEL --backend cuda`: measure() takes a model and a context.
//
//   cuda_bench [--quick]      (--quick: shorter runs, for the test script)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ssm/io/json.h"
#include "ssm/model/config.h"
#include "ssm/model/language_model.h"
#include "ssm/ops/context.h"
#include "ssm/train/init.h"

namespace ssm {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double seconds_of(const std::function<void()>& fn, int reps) {
  fn();  // warm-up: workspaces, cuBLAS heuristics
  cudaDeviceSynchronize();
  const double t0 = now();
  for (int i = 0; i < reps; ++i) fn();
  cudaDeviceSynchronize();
  return (now() - t0) / reps;
}

// Peak bf16 FLOP/s of this device as cuBLAS reaches it on 8192^3.
double measure_bf16_flops() {
  const int n = 8192;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cudaMalloc(&a, size_t{2} * n * n);
  cudaMalloc(&b, size_t{2} * n * n);
  cudaMalloc(&c, size_t{4} * n * n);
  cudaMemset(a, 0x3c, size_t{2} * n * n);  // finite bf16 values
  cudaMemset(b, 0x3c, size_t{2} * n * n);
  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1.f, zero = 0.f;
  const double s = seconds_of([&] {
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, c,
                 CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }, 10);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 2.0 * n * n * double(n) / s;
}

// HBM bytes/s (read + written) of a 4 GiB device-to-device copy.
double measure_hbm_bandwidth() {
  const size_t bytes = size_t{4} << 30;
  void *a = nullptr, *b = nullptr;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  const double s = seconds_of([&] { cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice); }, 5);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / s;
}

std::string config_json(const std::string& layer, bool mimo) {
  std::string ssm = "\"layer\": \"" + layer + "\", \"d_state\": 128, \"headdim\": 64, \"expand\": 2";
  if (layer == "Mamba2") ssm += ", \"d_conv\": 4, \"ngroups\": 1, \"chunk_size\": 256";
  else ssm += std::string(", \"ngroups\": 1, \"chunk_size\": 64, \"rope_fraction\": 0.5, \"is_mimo\": ") +
              (mimo ? "true, \"mimo_rank\": 4" : "false");
  return "{\"d_model\": 768, \"n_layer\": 24, \"vocab_size\": 50288, \"d_intermediate\": 0, "
         "\"attn_layer_idx\": [], \"attn_cfg\": {}, \"rms_norm\": true, \"residual_in_fp32\": true, "
         "\"fused_add_norm\": true, \"pad_vocab_size_multiple\": 8, \"tie_embeddings\": true, \"ssm_cfg\": {" +
         ssm + "}}";
}

struct Weights {
  double matmul_params = 0;  // projection weights (the prefill FLOPs: 2 per token each)
  double bytes = 0;          // every parameter's bytes on the device (what a decode step reads)
};

// Projections to BF16 (the embedding stays F32: the lookup and the tied head read it).
Weights to_bf16_on_device(LanguageModel& model, Device device) {
  Weights w;
  model.for_each_param([&](const std::string& name, Param& p) {
    if (p.value.ndim() == 2 && name.find("embedding") == std::string::npos &&
        name.find("proj") != std::string::npos) {
      p.value = p.value.to_dtype(DType::kBF16);
      w.matmul_params += double(p.value.numel());
    }
    w.bytes += double(p.value.nbytes());
  });
  model.to_device(device);
  return w;
}

Tensor random_ids(int64_t B, int64_t L, int64_t V) {
  Tensor t = Tensor::empty(DType::kI64, {B, L});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = (i * 7919 + 13) % V;
  return t;
}

void measure(const char* label, const std::string& layer, bool mimo, double peak_flops, double hbm, bool quick) {
  LanguageModel model(parse_model_config(parse_json(config_json(layer, mimo), label), label));
  initialize_model(model, 1);
  Context ctx("cuda", 1);
  const Weights w = to_bf16_on_device(model, ctx.device());
  const int64_t V = model.config().vocab_size;
  try {
    for (int64_t B : {int64_t{8}, int64_t{1}}) {
      const int64_t L = 2048;
      const Tensor ids = random_ids(B, L, V);
      const double s = seconds_of([&] { model.forward(ids, nullptr, ctx, /*last_only=*/true); }, quick ? 2 : 5);
      const double tps = B * L / s, flops = 2.0 * w.matmul_params * B * L / s;
      std::printf("%-12s prefill %2lld x %lld  %10.0f tokens/s  %8.2f ms  %5.1f%% of bf16 peak\n", label,
                  (long long)B, (long long)L, tps, s * 1e3, 100.0 * flops / peak_flops);
    }
    for (int64_t B : {int64_t{1}, int64_t{8}, int64_t{64}}) {
      ModelState state = model.make_state(B);
      std::vector<int64_t> tok(B, 1);
      const int steps = quick ? 20 : 100;
      const double s = seconds_of([&] { model.step(tok.data(), state, ctx); }, steps);
      // Bound: every weight read once per step, at the measured bandwidth.
      const double bound_s = w.bytes / hbm;
      std::printf("%-12s decode  batch %2lld   %10.0f tokens/s  %8.3f ms/step  %5.1f%% of HBM bound\n", label,
                  (long long)B, B / s, s * 1e3, 100.0 * bound_s / s);
    }
  } catch (const Error& e) {
    std::printf("%-12s not run on cuda: %s\n", label, e.what());
  }
}

}  // namespace
}  // namespace ssm

int main(int argc, char** argv) {
  // BF16 projections with the activations rounded to BF16, as the
  // reference's kernels run them (the backend's default splits them into
  // exact pieces: three GEMMs instead of one). SSM_CUDA_ROUND_ACTIVATIONS=0
  // measures that default.
  setenv("SSM_CUDA_ROUND_ACTIVATIONS", "1", /*overwrite=*/0);
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && std::strcmp(argv[1], "--profile") == 0) {
    // One Mamba-2 prefill (8 x 2048) and 3 decode steps at batch 1, then one
    // Mamba-3 SISO prefill, for a profiler.
    using namespace ssm;
    LanguageModel model(parse_model_config(parse_json(config_json("Mamba2", false), "profile"), "profile"));
    initialize_model(model, 1);
    Context ctx("cuda", 1);
    to_bf16_on_device(model, ctx.device());
    model.forward(random_ids(8, 2048, model.config().vocab_size), nullptr, ctx, true);
    ModelState state = model.make_state(1);
    const int64_t tok = 1;
    for (int i = 0; i < 3; ++i) model.step(&tok, state, ctx);
    // And one Mamba-3 SISO prefill (8 x 2048).
    LanguageModel m3(parse_model_config(parse_json(config_json("Mamba3", false), "profile"), "profile"));
    initialize_model(m3, 1);
    to_bf16_on_device(m3, ctx.device());
    m3.forward(random_ids(8, 2048, m3.config().vocab_size), nullptr, ctx, true);
    cudaDeviceSynchronize();
    return 0;
  }
  const double peak = ssm::measure_bf16_flops(), hbm = ssm::measure_hbm_bandwidth();
  std::printf("device bounds: bf16 %.0f TFLOP/s (cuBLAS 8192^3), HBM %.0f GB/s (device copy, read + write)\n",
              peak / 1e12, hbm / 1e9);
  std::printf("SSM_CUDA_ROUND_ACTIVATIONS=%s\n", std::getenv("SSM_CUDA_ROUND_ACTIVATIONS"));
  try {
    ssm::measure("mamba2", "Mamba2", false, peak, hbm, quick);
    ssm::measure("mamba3-siso", "Mamba3", false, peak, hbm, quick);
    ssm::measure("mamba3-mimo4", "Mamba3", true, peak, hbm, quick);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
