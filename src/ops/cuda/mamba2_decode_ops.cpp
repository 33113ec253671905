// mamba2_decode_stack on the GPU (ssm/ops/mamba2_decode.h): the layers'
// tensors as the kernel's table (launch_mamba2_decode.h), its scratch from
// the context's arena; false (the caller composes) when the kernel is off
// (CudaResources::persistent_decode) or does not take the shapes. Its own
// file so that the CPU emulator (scripts/cuda-emulate) links it alone.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_mamba2_decode.h"
#include "ops/cuda/runtime.h"
#include "ops/tensor_data.h"

namespace ssm::cuda {
namespace {

const float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool mamba2_decode_stack(Context& ctx, const ops::Mamba2DecodeStackArgs& a) {
  CudaResources& r = resources(ctx);
  using Launch = ops::Mamba2DecodeStackArgs::Launch;
  const int mode = a.launch == Launch::kBackend     ? r.persistent_decode
                   : a.launch == Launch::kOneLaunch ? 1
                                                    : 2;
  if (mode == 0) return false;
  const ops::Mamba2StackLayer& first = a.layers.front();
  const DType wt = first.in_proj.dtype();
  if (wt != DType::kF32 && wt != DType::kBF16) return false;
  // An F32 state only (mamba2_decode_stack.cu reads it as F32); a BF16 one
  // takes the layers' ops, whose ssd_step takes it natively.
  for (const ops::Mamba2StackLayer& s : a.layers)
    if (s.state.dtype() != DType::kF32) return false;
  Mamba2DecodeLaunch l{};
  l.B = static_cast<int>(a.h.dim(0));
  l.D = static_cast<int>(a.h.dim(2));
  l.H = static_cast<int>(first.dt_bias.dim(0));
  l.P = static_cast<int>(first.state.dim(2));
  l.N = static_cast<int>(first.state.dim(3));
  l.G = static_cast<int>(a.groups);
  l.K = static_cast<int>(first.conv_weight.dim(2));
  l.norm_group = static_cast<int>(a.norm_group > 0 ? a.norm_group : l.H * l.P);
  l.norm_before_gate = a.norm_before_gate;
  l.bf16 = wt == DType::kBF16;
  l.eps = a.eps;
  l.gate_eps = a.gate_eps;
  l.dt_min = a.dt_min;
  l.dt_max = a.dt_max;
  // Every layer of one shape and weight type (the kernel's dimensions are
  // the launch's), its matrices 16-byte aligned.
  for (const ops::Mamba2StackLayer& s : a.layers)
    if (s.in_proj.dtype() != wt || s.dt_bias.dim(0) != l.H || s.state.dim(2) != l.P ||
        s.state.dim(3) != l.N || s.conv_weight.dim(2) != l.K || !aligned16(s.in_proj.raw()) ||
        !aligned16(s.out_proj.raw()))
      return false;
  const int grid = plan_mamba2_decode(l);
  if (grid == 0) return false;
  const int64_t HP = int64_t{l.H} * l.P, NZ = first.in_proj.dim(0);
  Arena& arena = ctx.arena();
  l.h = ops::elements<float>(a.h);
  l.zxbcdt = arena.alloc(DType::kF32, {l.B, NZ}).data<float>();
  l.y = arena.alloc(DType::kF32, {l.B, HP}).data<float>();
  l.sums = arena.alloc(DType::kF32, {l.B, HP / kDecodeRows}).data<float>();
  l.barrier = r.grid_barrier;
  const bool per_phase = mode == 2;
  for (size_t begin = 0; begin < a.layers.size(); begin += kDecodeMaxLayers) {
    const size_t end = std::min(a.layers.size(), begin + kDecodeMaxLayers);
    l.n_layers = static_cast<int>(end - begin);
    for (size_t i = begin; i < end; ++i) {
      const ops::Mamba2StackLayer& s = a.layers[i];
      l.layers[i - begin] = {.norm_weight = s.norm_weight.data<float>(),
                             .in_proj = s.in_proj.raw(),
                             .in_bias = f32_or_null(s.in_bias),
                             .conv_weight = s.conv_weight.data<float>(),
                             .conv_bias = f32_or_null(s.conv_bias),
                             .dt_bias = s.dt_bias.data<float>(),
                             .A_log = s.A_log.data<float>(),
                             .D = f32_or_null(s.D),
                             .gate_norm_weight = f32_or_null(s.gate_norm_weight),
                             .out_proj = s.out_proj.raw(),
                             .out_bias = f32_or_null(s.out_bias),
                             .conv_state = ops::elements<float>(s.conv_state),
                             .state = ops::elements<float>(s.state)};
    }
    launch_mamba2_decode(l, 0, 3 * l.n_layers, grid, per_phase, stream(ctx));
    check_launch("mamba2_decode_stack");
  }
  return true;
}

}  // namespace

void add_mamba2_decode_kernels(OpTable& t) { t.mamba2_decode_stack = &mamba2_decode_stack; }

}  // namespace ssm::cuda
