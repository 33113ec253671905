// The "cuda" backend of the CPU emulator (run.sh): host memory, ref's op
// table with the entries of mamba3_attention_backward_ops.cpp,
// hybrid_backward_ops.cpp, ssd_step_ops.cpp and mamba3_prepare (their
// kernels emulated), and stand-ins for the runtime's stream and checks.
#include "ops/backend_registry.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/mamba3_launch_inputs.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"
#include "ssm/ops/mamba3.h"
#include "ssm/ops/op_table.h"

namespace ssm {
namespace cuda {
CudaResources& resources(Context&) {
  alignas(64) static char buf[sizeof(CudaResources)] = {};
  return *reinterpret_cast<CudaResources*>(buf);
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
// The host side of mamba3_ops.cpp's mamba3_prepare (that file also holds
// the tensor-core scans, which the emulator cannot run).
void emu_mamba3_prepare(Context& ctx, const ops::Mamba3PrepareArgs& a) {
  Mamba3PrepareLaunch l;
  static_cast<Mamba3PrepareInputs&>(l) = mamba3_prepare_inputs(a);
  if (l.B * l.L == 0) return;
  l.B_bias = a.B_bias.data<float>();
  l.C_bias = a.C_bias.data<float>();
  l.phase = ptr_or_null(a.phase);
  l.B_normed = ops::elements<float>(a.B_normed);
  l.C_normed = ops::elements<float>(a.C_normed);
  l.ang_rate = ptr_or_null(a.ang_rate);
  l.dt = ops::elements<float>(a.dt);
  l.A = ops::elements<float>(a.A);
  l.lam = ops::elements<float>(a.lam);
  l.q = ops::elements<float>(a.q);
  l.k = ops::elements<float>(a.k);
  l.v = ops::elements<float>(a.v);
  Arena::Scope scope(ctx.arena());
  if (l.S > 0)
    l.phases = a.phases.defined()
                   ? ops::elements<float>(a.phases)
                   : ops::elements<float>(ctx.arena().alloc(DType::kF32, {l.B, l.H, l.L, l.S}));
  launch_mamba3_prepare(l, stream(ctx));
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
    table_.mamba3_prepare = &cuda::emu_mamba3_prepare;
  }
  std::string_view name() const override { return "cuda"; }
  Device device() const override { return Device::host(); }
  const OpTable& ops() const override { return table_; }

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
