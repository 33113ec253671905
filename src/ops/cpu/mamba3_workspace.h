// Tensor access, workspace and thread splits of the cpu Mamba-3 kernels. The arena is not
// thread-safe, so a kernel takes every thread's workspace before the threads
// start: its work [0, n) is cut into parts, at most one per thread (so all
// parts run at once), and each part gets its own slot. Which part computes
// an index never changes its result.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ssm/ops/context.h"

namespace ssm::cpu::m3 {

// A tensor's elements for writing: a Tensor is a handle to shared bytes, so
// a const handle (in a const argument struct) may still name outputs.
inline float* out(const Tensor& t) { return const_cast<float*>(t.data<float>()); }
inline float* out_or_null(const Tensor& t) { return t.defined() ? out(t) : nullptr; }
inline const float* in_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// A tensor with rows (a column block of the in_proj output, or of its
// gradient): element (row, col).
template <typename T>
struct Block {
  T* p;
  int64_t ld;
  T& operator()(int64_t row, int64_t col) const { return p[row * ld + col]; }
};
inline Block<const float> in_block(const Tensor& t) { return {t.data<float>(), t.row_stride()}; }
inline Block<float> out_block(const Tensor& t) { return {out(t), t.row_stride()}; }

// Hands out consecutive runs of one buffer; with no buffer it only counts,
// so that the code that carves a workspace also sizes it.
template <typename T>
class Carver {
 public:
  explicit Carver(T* base = nullptr) : base_(base) {}
  T* take(int64_t n) {
    T* p = base_ ? base_ + used_ : nullptr;
    used_ += n;
    return p;
  }
  int64_t used() const { return used_; }

 private:
  T* base_;
  int64_t used_ = 0;
};

struct Parts {
  int64_t n = 0, count = 1;
  int64_t begin(int64_t part) const { return part * n / count; }
  int64_t end(int64_t part) const { return (part + 1) * n / count; }
};
inline Parts split(const Context& ctx, int64_t n) {
  return {n, std::clamp<int64_t>(ctx.threads(), 1, std::max<int64_t>(n, 1))};
}

// fn(part, begin, end) for every part, in parallel.
template <typename Fn>
void for_each_part(Context& ctx, const Parts& parts, Fn&& fn) {
  ctx.pool().parallel_for(parts.count, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) fn(p, parts.begin(p), parts.end(p));
  });
}

// One workspace W per part, from the arena. W holds its sizes and has
// carve(Carver<float>&, Carver<double>&), which points its buffers.
template <typename W>
class Slots {
 public:
  Slots(Context& ctx, const Parts& parts, const W& sizes) : sizes_(sizes) {
    Carver<float> f;
    Carver<double> d;
    W(sizes_).carve(f, d);
    floats_ = std::max<int64_t>(f.used(), 1);
    doubles_ = std::max<int64_t>(d.used(), 1);
    f32_ = ctx.arena().alloc(DType::kF32, {parts.count, floats_});
    f64_ = ctx.arena().alloc(DType::kF64, {parts.count, doubles_});
  }
  W operator[](int64_t part) const {
    W w = sizes_;
    Carver<float> f(out(f32_) + part * floats_);
    Carver<double> d(const_cast<double*>(f64_.data<double>()) + part * doubles_);
    w.carve(f, d);
    return w;
  }

 private:
  W sizes_;
  int64_t floats_, doubles_;
  Tensor f32_, f64_;
};

}  // namespace ssm::cpu::m3
