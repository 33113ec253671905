#include "ops/state_dtype.h"

#include "ssm/tensor/convert.h"

namespace ssm::ops::detail {

F32State::F32State(Context& ctx, const Tensor& state, bool native) : state_(state), f32_(state) {
  if (!state.defined() || state.dtype() != DType::kBF16 || native) return;
  // A device backend's BF16 state is native here (OpCheck::state admits it
  // only with OpTable::bf16_state_scans); this host copy would read device memory.
  if (!state.device().is_host())
    throw Error(cat(ctx.backend().name(), ": a BF16 state is widened on the host only (--state-dtype f32)"));
  f32_ = ctx.arena().alloc(DType::kF32, state.shape());
  bf16_to_f32(state.raw(), f32_.data<float>(), state.numel());
  copied_ = true;
}

void F32State::store() const {
  if (copied_) f32_to_bf16(f32_.data<float>(), const_cast<void*>(state_.raw()), state_.numel());
}

bool bf16_state_native(const Context& ctx, int64_t L) {
  const OpTable& ops = ctx.backend().ops();
  return ops.bf16_state_scans || (L == 1 && ops.bf16_state_steps);
}

}  // namespace ssm::ops::detail
