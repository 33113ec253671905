// What every op's public function does before its kernel runs, the same for
// every backend: check the arguments (a mismatch is a bug in the caller, so
// it throws naming the op, the argument and what was expected), find the
// backend's kernel, and open a workspace scope for it.
#pragma once

#include "ssm/ops/backend.h"
#include "ssm/ops/op_table.h"

namespace ssm::ops::detail {

class OpCheck {
 public:
  OpCheck(Context& ctx, const char* op) : ctx_(ctx), op_(op) {}

  // Defined, on the context's device, F32 (or dtype), with rows.
  const OpCheck& rows(const char* name, const Tensor& t, DType dtype = DType::kF32) const;
  // Like rows(), and also rows() == n and cols() == c (-1: any).
  const OpCheck& rows(const char* name, const Tensor& t, int64_t n, int64_t c,
                      DType dtype = DType::kF32) const;
  // Defined, on the device, of dtype, dense, of exactly this shape.
  const OpCheck& dense(const char* name, const Tensor& t, const Shape& shape,
                       DType dtype = DType::kF32) const;
  // Undefined, or as dense() says.
  const OpCheck& optional(const char* name, const Tensor& t, const Shape& shape,
                          DType dtype = DType::kF32) const;
  // Undefined, or as rows(name, t, n, c) says.
  const OpCheck& optional_rows(const char* name, const Tensor& t, int64_t n, int64_t c) const;
  // A recurrent state: undefined, or dense of this shape, F32 or (on a
  // host backend, or one whose scans take it: OpTable::bf16_state_scans;
  // the others refuse it by name) BF16 (ops/state_dtype.h).
  const OpCheck& state(const char* name, const Tensor& t, const Shape& shape) const;
  // On the host, dense, of dtype and shape (scheduling data: positions, targets).
  const OpCheck& host(const char* name, const Tensor& t, const Shape& shape, DType dtype) const;
  const OpCheck& expect(bool ok, const char* what) const;

  template <typename Fn>
  Fn kernel(Fn OpTable::*slot) const {
    const Fn fn = ctx_.backend().ops().*slot;
    if (!fn) unsupported();
    return fn;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void unsupported() const;
  void on_device(const char* name, const Tensor& t) const;
  Context& ctx_;
  const char* op_;
};

// Runs a kernel inside a workspace scope of the context's arena.
template <typename Fn, typename... Args>
auto run(Context& ctx, Fn fn, const Args&... args) {
  Arena::Scope scope(ctx.arena());
  return fn(ctx, args...);
}

}  // namespace ssm::ops::detail
