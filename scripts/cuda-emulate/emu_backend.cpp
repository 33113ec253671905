// The "cuda" backend of the CPU emulator (run.sh): host memory, ref's op
// table with the entries of mamba3_attention_backward_ops.cpp,
// hybrid_backward_ops.cpp, ssd_step_ops.cpp, mamba2_decode_ops.cpp, norm_linear_ops.cpp (with the
// few-row projection kernels, for norm_linear and linear's few rows), mixer_ops.cpp (the norms, conv1d, the SSD
// scan's chunked and step kernels), ssd_scan_backward_ops.cpp, norm_conv_backward_ops.cpp
// (the norms' and conv1d's backward), mamba3_ops.cpp (prepare, the chunked
// and step scans, output), dropout_ops.cpp and optimizer_ops.cpp (AdamW)
// with their kernels
// emulated, and stand-ins for the runtime's stream and checks.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "ops/backend_registry.h"
#include "ops/cuda/gemm_f32.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/launch_ssd_step.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/mamba3_launch_inputs.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ssm/ops/mamba3.h"
#include "ssm/ops/op_table.h"

// Host memory: the runtime's memset and copies are memset and memcpy.
extern "C" cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t) {
  std::memset(p, value, n);
  return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind,
                                       cudaStream_t) {
  std::memcpy(dst, src, n);
  return cudaSuccess;
}
extern "C" cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind) {
  std::memcpy(dst, src, n);
  return cudaSuccess;
}
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

namespace ssm {
namespace {
// A context's resources in the emulator: only the rounded-products switch
// (set_bf16_compute), so that the op tests reach the kernels' one-TF32
// paths (RoundedProductsStayNearRef) as on the GPU.
class EmuResources : public BackendResources {
 public:
  bool set_bf16_compute(bool on) override {
    bf16_compute = on;
    return true;
  }
  bool bf16_compute = false;
};
}  // namespace
namespace cuda {
CudaResources& resources(Context& ctx) {
  alignas(64) static char buf[sizeof(CudaResources)] = {};
  static std::vector<unsigned> counters(kStepCounters, 0u);  // as the constructor's, zero
  auto& r = *reinterpret_cast<CudaResources*>(buf);
  r.step_counters = counters.data();
  // norm_linear's fused kernel wherever it fits and the one-wave kernel
  // (opt-in on the GPU), so that both kernels and their norms are checked.
  // SSM_CUDA_FUSED_DECODE=warp or =split checks the warp-level norm, a warp
  // or several a column, instead (read at every call).
  const char* fused = std::getenv("SSM_CUDA_FUSED_DECODE");
  const std::string_view mode(fused ? fused : "");
  r.fused_decode = mode == "warp"    ? cuda::FusedDecode::kWarp
                   : mode == "split" ? cuda::FusedDecode::kSplit
                                     : cuda::FusedDecode::kAlways;
  r.one_wave_projections = true;
  const char* columns = std::getenv("SSM_CUDA_STREAM_COLUMNS");  // read at every call
  r.stream_columns = !(columns && std::string_view(columns) == "0");
  r.overlap_launches = false;
  r.persistent_decode = 2;  // the decode stack's kernel, a launch a phase (tests ask for the other)
  r.grid_barrier = nullptr;
  // Read at every call, as the GPU's resources read it when a context is made.
  const char* heads = std::getenv("SSM_CUDA_SCAN_HEADS");
  const std::string_view v(heads ? heads : "");
  r.scan_heads = v == "1" || v == "2" || v == "4" || v == "8" ? v[0] - '0' : 0;
  const char* f16 = std::getenv("SSM_CUDA_SSD_BACKWARD_F16");
  r.ssd_backward_f16 = !(f16 && std::string_view(f16) == "0");
  const char* stream_state = std::getenv("SSM_CUDA_STATE_STREAM");
  r.stream_state_step = !(stream_state && std::string_view(stream_state) == "0");
  const auto* own = dynamic_cast<const EmuResources*>(ctx.resources());
  r.bf16_compute = own && own->bf16_compute;
  return r;
}
void check_launch(const char*) {}
void check(cudaError_t, const char*) {}
// elementwise.cu's fill (not emulated), for train_ops.cpp.
void launch_fill(Rows t, float value, cudaStream_t) {
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c) t.p[r * t.stride + c] = value;
}
// elementwise.cu's sum of squares (not emulated), for train_ops.cpp's
// sum_squares_to: in double, one thread's order (not the kernel's tree).
void launch_sum_squares(ConstRows t, double* out, cudaStream_t) {
  double acc = 0;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c) {
      const double v = t.p[r * t.stride + c];
      acc += v * v;
    }
  *out = acc;
}
// gemm_f32.cpp's products on the host (no cuBLAS), for train_ops.cpp's head
// loss: column-major, each input rounded to bf16 (nearest even) under bf16
// compute as the GPU's copies are, sums in double.
namespace {
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}
float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
template <typename AOf, typename BOf>
void host_gemm(int64_t m, int64_t n, int64_t k, AOf a, BOf b, float beta, float* C, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(a(i, p)) * b(p, j);
      float& c = C[i + j * ldc];
      c = static_cast<float>(acc) + (beta == 0.f ? 0.f : beta * c);
    }
}
// Element (i, p) of op(M), M column-major with leading dimension ld.
float op_at(const float* M, int64_t ld, cublasOperation_t t, int64_t i, int64_t p) {
  return t == CUBLAS_OP_N ? M[i + p * ld] : M[p + i * ld];
}
}  // namespace
void gemm_f32(Context& ctx, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
              int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc, const char*) {
  const bool bf = resources(ctx).bf16_compute;
  host_gemm(
      m, n, k,
      [&](int64_t i, int64_t p) {
        const float v = op_at(A, lda, ta, i, p);
        return bf ? round_bf16(v) : v;
      },
      [&](int64_t p, int64_t j) {
        const float v = op_at(B, ldb, tb, p, j);
        return bf ? round_bf16(v) : v;
      },
      beta, C, ldc);
}
void gemm_f32_bf16(Context&, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                   int64_t k, const float* A, int64_t lda, const void* B_bf16, int64_t ldb,
                   float beta, float* C, int64_t ldc, const char*) {
  const auto* Bh = static_cast<const uint16_t*>(B_bf16);
  host_gemm(
      m, n, k, [&](int64_t i, int64_t p) { return round_bf16(op_at(A, lda, ta, i, p)); },
      [&](int64_t p, int64_t j) {
        return bf16_value(tb == CUBLAS_OP_N ? Bh[p + j * ldb] : Bh[j + p * ldb]);
      },
      beta, C, ldc);
}
const void* bf16_copy(Context& ctx, const float* src, int64_t rows, int64_t cols, int64_t ld) {
  Tensor t = ctx.arena().alloc(DType::kBF16, {cols, rows});
  auto* d = static_cast<uint16_t*>(t.raw());
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) {
      const float v = round_bf16(src[i + j * ld]);
      uint32_t u;
      std::memcpy(&u, &v, 4);
      d[i + j * rows] = static_cast<uint16_t>(u >> 16);
    }
  return t.raw();
}
// linear: few rows through linear.cpp's few-row kernel (norm_linear_ops.cpp),
// the rest (cuBLAS's on the GPU) ref's.
void emu_linear(Context& ctx, const ops::LinearArgs& a) {
  if (!linear_few_rows(ctx, a)) ref_backend().ops().linear(ctx, a);
}
}  // namespace cuda
namespace {
class EmuBackend : public Backend {
 public:
  EmuBackend() {
    table_ = ref_backend().ops();
    cuda::add_mamba3_attention_backward_kernels(table_);
    cuda::add_hybrid_backward_kernels(table_);
    cuda::add_ssd_step_kernels(table_);
    cuda::add_mamba2_decode_kernels(table_);
    cuda::add_ssd_scan_backward_kernels(table_);
    cuda::add_norm_linear_kernels(table_);
    table_.linear = &cuda::emu_linear;
    cuda::add_dropout_kernels(table_);
    cuda::add_optimizer_kernels(table_);
#ifdef SSM_EMU_REF_FORWARD
    // Training (run.sh TRAIN=1): of the forward ops only mamba3_prepare is
    // emulated; emulated norms and scans would make the training curves
    // hours long.
    OpTable m3;
    cuda::add_mamba3_kernels(m3);
    table_.mamba3_prepare = m3.mamba3_prepare;
#else
    // Of hybrid_ops.cpp's forward ops, attention's (attention.cu).
    OpTable hybrid;
    cuda::add_hybrid_kernels(hybrid);
    table_.attention_append_kv = hybrid.attention_append_kv;
    table_.attention = hybrid.attention;
    cuda::add_mixer_kernels(table_);
    cuda::add_mamba3_kernels(table_);
    // Every op that takes a state is the cuda one here (backend.cpp).
    table_.bf16_state_steps = table_.bf16_state_scans = true;
    // The norms' and conv1d's backward (128 blocks of up to 512 fibers a
    // call: seconds each, too slow for TRAIN=1's training curves) and
    // train_ops.cpp's head loss (its products on the host, above).
    cuda::add_norm_conv_backward_kernels(table_);
    OpTable train;
    cuda::add_train_kernels(train);
    table_.head_cross_entropy = train.head_cross_entropy;
#endif
  }
  std::string_view name() const override { return "cuda"; }
  Device device() const override { return Device::host(); }
  const OpTable& ops() const override { return table_; }
  std::unique_ptr<BackendResources> make_resources() const override {
    return std::make_unique<EmuResources>();
  }

 private:
  OpTable table_;
};
}  // namespace
const Backend* cuda_backend_on_device(int index) {
  static const EmuBackend b;
  return index == 0 ? &b : nullptr;  // one emulated device
}
const Backend* cuda_backend_if_built() { return cuda_backend_on_device(0); }
}  // namespace ssm
