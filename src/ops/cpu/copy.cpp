// The strided copy as runs of bytes: the innermost dimensions that are
// contiguous in both tensors merge into one run (one memcpy), the other
// dimensions merge where they nest and are walked like an odometer. Gathering
// the last row of each sequence is B runs of a row; growing a KV cache, B H_kv
// runs of a head's whole old cache.
#include "ops/cpu/copy.h"

#include <array>
#include <cstring>

#include "ops/cpu/parallel.h"

namespace ssm::cpu {

namespace {

struct CopyPlan {
  int64_t run_elements = 1;
  int64_t runs = 1;
  int dims = 0;  // the dimensions walked, innermost first
  std::array<int64_t, Shape::kMaxDims> extent{}, dst_stride{}, src_stride{};  // in elements
};

CopyPlan plan_copy(const Tensor& dst, const Tensor& src) {
  CopyPlan p;
  int d = dst.ndim() - 1;
  for (; d >= 0; --d) {
    const int64_t n = dst.dim(d);
    if (n == 1) continue;
    if (dst.stride(d) != p.run_elements || src.stride(d) != p.run_elements) break;
    p.run_elements *= n;
  }
  for (; d >= 0; --d) {
    const int64_t n = dst.dim(d);
    if (n == 1) continue;
    p.runs *= n;
    const int k = p.dims - 1;
    if (k >= 0 && dst.stride(d) == p.extent[k] * p.dst_stride[k] &&
        src.stride(d) == p.extent[k] * p.src_stride[k]) {
      p.extent[k] *= n;  // nests in the dimension inside it
      continue;
    }
    p.extent[p.dims] = n;
    p.dst_stride[p.dims] = dst.stride(d);
    p.src_stride[p.dims] = src.stride(d);
    ++p.dims;
  }
  return p;
}

}  // namespace

void copy(Context& ctx, const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  const CopyPlan p = plan_copy(dst, src);
  const int64_t size = static_cast<int64_t>(dtype_size(dst.dtype()));
  char* to = static_cast<char*>(const_cast<void*>(dst.raw()));
  const char* from = static_cast<const char*>(src.raw());
  const size_t run_bytes = static_cast<size_t>(p.run_elements * size);
  parallel_items(ctx.pool(), p.runs, p.run_elements, [&](int64_t r0, int64_t r1) {
    std::array<int64_t, Shape::kMaxDims> index{};
    int64_t at_dst = 0, at_src = 0;
    for (int64_t rest = r0, k = 0; k < p.dims; ++k) {
      index[k] = rest % p.extent[k];
      rest /= p.extent[k];
      at_dst += index[k] * p.dst_stride[k];
      at_src += index[k] * p.src_stride[k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      std::memcpy(to + at_dst * size, from + at_src * size, run_bytes);
      for (int k = 0; k < p.dims; ++k) {
        at_dst += p.dst_stride[k];
        at_src += p.src_stride[k];
        if (++index[k] < p.extent[k]) break;
        at_dst -= p.extent[k] * p.dst_stride[k];
        at_src -= p.extent[k] * p.src_stride[k];
        index[k] = 0;
      }
    }
  });
}

}  // namespace ssm::cpu
