// A recurrent state stored in BF16 (ModelState's state dtype, `--state-dtype
// bf16`): every op that reads it widens it exactly to F32, computes as with
// an F32 state, and rounds the new state to BF16 (nearest even) when it
// stores it. A backend's step kernel may do that row by row in place
// (OpTable::bf16_state_steps); everywhere else the op front end does it
// around the F32 kernel with this workspace copy.
#pragma once

#include "ops/op_check.h"

namespace ssm::ops::detail {

// The tensor an F32 kernel works on: `state` itself when it is F32,
// undefined or taken natively; else an F32 copy in the context's arena (the
// caller holds a scope on it), widened here and rounded back by store().
class F32State {
 public:
  F32State(Context& ctx, const Tensor& state, bool native);
  const Tensor& tensor() const { return f32_; }
  void store() const;

 private:
  Tensor state_, f32_;
  bool copied_ = false;
};

// True when ctx's backend takes a BF16 state itself in a scan of L steps
// (OpTable::bf16_state_steps at L = 1, bf16_state_scans at every L).
bool bf16_state_native(const Context& ctx, int64_t L);

// kernel(args) with args.*state seen as F32 (an F32State around the call).
template <class Kernel, class Args>
void run_with_f32_state(Context& ctx, const Kernel& kernel, const Args& args, Tensor Args::*state,
                        bool native) {
  Arena::Scope scope(ctx.arena());
  const F32State f32_state(ctx, args.*state, native);
  Args f32 = args;
  f32.*state = f32_state.tensor();
  run(ctx, kernel, f32);
  f32_state.store();
}

}  // namespace ssm::ops::detail
