// Embedding rows by id; the backward sums each id's rows in double, rows in
// their order, visiting ids in sorted order.
#include "ops/ref/embedding.h"

#include <algorithm>
#include <numeric>

#include "ops/ref/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

int64_t id_at(const Tensor& ids, int64_t r, int64_t vocab) {
  const int64_t id = ids.dtype() == DType::kI64 ? ids.data<int64_t>()[r] : ids.data<int32_t>()[r];
  SSM_CHECK(id >= 0 && id < vocab, "id ", id, " at ", r, " outside the table's ", vocab, " rows");
  return id;
}

}  // namespace

template <typename T>
void embedding([[maybe_unused]] Context& ctx, const ops::EmbeddingArgs& a) {
  const int64_t V = a.table.dim(0), D = a.table.dim(1);
  if (a.table.dtype() != DType::kF32 && a.table.dtype() != DType::kF64) {
    // A 16- or 8-bit table: each gathered row at its exact value.
    for (int64_t r = 0; r < a.ids.numel(); ++r) {
      const Tensor from = a.table.rows(id_at(a.ids, r, V), id_at(a.ids, r, V) + 1).to_f32();
      T* to = ops::row<T>(a.out, r);
      for (int64_t d = 0; d < D; ++d)
        to[d] = static_cast<T>(static_cast<double>(a.scale) * from.data<float>()[d]);
    }
    return;
  }
  for (int64_t r = 0; r < a.ids.numel(); ++r) {
    const T* from = ops::elements<T>(a.table) + id_at(a.ids, r, V) * D;
    T* to = ops::row<T>(a.out, r);
    for (int64_t d = 0; d < D; ++d) to[d] = static_cast<T>(static_cast<double>(a.scale) * from[d]);
  }
}

template <typename T>
void embedding_backward(Context& ctx, const ops::EmbeddingBackwardArgs& a) {
  const int64_t V = a.dtable.dim(0), D = a.dtable.dim(1), R = a.ids.numel();
  // Rows ordered by (id, row): each id's rows together, in their order.
  int64_t* order = ctx.arena().alloc(DType::kI64, {R}).data<int64_t>();
  std::iota(order, order + R, int64_t{0});
  std::sort(order, order + R, [&](int64_t x, int64_t y) {
    const int64_t ix = id_at(a.ids, x, V), iy = id_at(a.ids, y, V);
    return ix != iy ? ix < iy : x < y;
  });
  for (int64_t first = 0, last = 0; first < R; first = last) {
    const int64_t id = id_at(a.ids, order[first], V);
    while (last < R && id_at(a.ids, order[last], V) == id) ++last;
    T* to = ops::elements<T>(a.dtable) + id * D;
    for (int64_t d = 0; d < D; ++d) {
      double acc = to[d];
      for (int64_t i = first; i < last; ++i)
        acc += static_cast<double>(a.scale) * ops::row<T>(a.dout, order[i])[d];
      to[d] = static_cast<T>(acc);
    }
  }
}

template void embedding<float>(Context&, const ops::EmbeddingArgs&);
template void embedding<double>(Context&, const ops::EmbeddingArgs&);
template void embedding_backward<float>(Context&, const ops::EmbeddingBackwardArgs&);
template void embedding_backward<double>(Context&, const ops::EmbeddingBackwardArgs&);

void add_embedding_kernels(OpTable& t) {
  t.embedding = &embedding<float>;
  t.embedding_backward = &embedding_backward<float>;
}

}  // namespace ssm::ref
