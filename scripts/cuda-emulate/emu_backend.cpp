// The "cuda" backend of the CPU emulator (run.sh): host memory, ref's op
// table with the entries of mamba3_attention_backward_ops.cpp,
// hybrid_backward_ops.cpp, ssd_step_ops.cpp, mamba2_decode_ops.cpp, norm_linear_ops.cpp (with the
// few-row projection kernel), mixer_ops.cpp (the norms, conv1d, the SSD
// scan's chunked and step kernels), ssd_scan_backward_ops.cpp and mamba3_ops.cpp
// (prepare, the chunked and step scans, output) and dropout_ops.cpp with their kernels
// emulated, and stand-ins for the runtime's stream and checks.
#include <memory>

#include "ops/backend_registry.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/launch_ssd_step.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/mamba3_launch_inputs.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ssm/ops/mamba3.h"
#include "ssm/ops/op_table.h"

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
  r.fused_decode = true;  // as the constructor's default
  r.persistent_decode = 2;  // the decode stack's kernel, a launch a phase (tests ask for the other)
  r.grid_barrier = nullptr;
  const auto* own = dynamic_cast<const EmuResources*>(ctx.resources());
  r.bf16_compute = own && own->bf16_compute;
  return r;
}
void check_launch(const char*) {}
void check(cudaError_t, const char*) {}
void launch_column_sums(ConstRows src, float* dst, cudaStream_t) {
  for (int64_t c = 0; c < src.cols; ++c) {
    float acc = 0;
    for (int64_t r = 0; r < src.rows; ++r) acc += src.p[r * src.stride + c];
    dst[c] += acc;
  }
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
    cuda::add_dropout_kernels(table_);
#ifdef SSM_EMU_REF_FORWARD
    // Training (run.sh TRAIN=1): of the forward ops only mamba3_prepare is
    // emulated; emulated norms and scans would make the training curves
    // hours long.
    OpTable m3;
    cuda::add_mamba3_kernels(m3);
    table_.mamba3_prepare = m3.mamba3_prepare;
#else
    cuda::add_mixer_kernels(table_);
    cuda::add_mamba3_kernels(table_);
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
