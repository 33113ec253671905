// The host side of AdamW on the GPU: one slice at a time (ops::adamw), or
// every slice of a model in one launch with the gradient-norm clip folded
// in (ops::adamw_slices). Apart from the runtime's launch check, nothing
// here needs a GPU: the CPU emulator (scripts/cuda-emulate) runs it.
#include <cmath>
#include <cstddef>
#include <cstring>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/runtime.h"
#include "ops/tensor_data.h"

namespace ssm::cuda {
namespace {

// The step's scalars, computed on the host as they always were.
template <typename Args>
AdamWStep step_of(const Args& a) {
  const double step = static_cast<double>(a.step);
  return adamw_step(a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, 1.0 - std::pow(a.beta1, step),
                    1.0 - std::pow(a.beta2, step));
}

void adamw(Context& ctx, const ops::AdamWArgs& a) {
  launch_adamw(ops::elements<float>(a.param), a.grad.data<float>(), ops::elements<float>(a.m),
               ops::elements<float>(a.v), a.param.numel(), step_of(a), stream(ctx));
  check_launch("adamw");
}

static_assert(sizeof(AdamWSliceLaunch) == sizeof(ops::AdamWSlice) &&
                  offsetof(AdamWSliceLaunch, begin) == offsetof(ops::AdamWSlice, begin) &&
                  offsetof(AdamWSliceLaunch, decays) == offsetof(ops::AdamWSlice, decays) &&
                  offsetof(AdamWSliceLaunch, bf16) == offsetof(ops::AdamWSlice, bf16),
              "the fused AdamW's table is ops::AdamWSlice's");

// The step's scalars as adamw_slices' args give them (rate and step from
// the step's inputs when a recorded step replays).
AdamWStep slices_step_of(const ops::AdamWSlicesArgs& a, double lr, int64_t step) {
  ops::AdamWSlicesArgs at = a;
  at.lr = lr;
  at.step = step;
  AdamWStep s = step_of(at);
  if (a.clip_sum_squares.defined()) {
    s.clip_sum_squares = a.clip_sum_squares.data<double>();
    s.max_norm = a.max_norm;
  }
  return s;
}

void adamw_slices(Context& ctx, const ops::AdamWSlicesArgs& a) {
  const AdamWStep step = slices_step_of(a, a.lr, a.step);
  Arena::Scope scope(ctx.arena());
  constexpr int64_t kWords = (sizeof(AdamWStep) + 7) / 8;
  Tensor on = ctx.arena().alloc(DType::kI64, {kWords});
  // Through the queued copy (a recorded step refills it from the next
  // step's rate and count; a context without the queued copy, the CPU
  // emulator's, copies synchronously).
  const BackendResources::StepInputFill refill = [a](const BackendResources::StepInputs& in,
                                                     void* out) {
    const AdamWStep s = slices_step_of(a, in.lr, in.step);
    std::memcpy(out, &s, sizeof s);
  };
  BackendResources* r = ctx.resources();
  if (!(r && r->copy_step_input_queued(on.raw(), &step, sizeof step, refill)))
    check(cudaMemcpy(on.raw(), &step, sizeof step, cudaMemcpyHostToDevice), "adamw_slices (scalars)");
  launch_adamw_slices(reinterpret_cast<const AdamWSliceLaunch*>(a.table.data<int64_t>()), a.slices,
                      a.elements, static_cast<const AdamWStep*>(on.raw()), stream(ctx));
  check_launch("adamw_slices");
}

}  // namespace

void add_optimizer_kernels(OpTable& t) {
  t.adamw = &adamw;
  t.adamw_slices = &adamw_slices;
}

}  // namespace ssm::cuda
