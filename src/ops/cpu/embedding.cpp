// Embedding rows by id, parallel over rows. The backward goes parallel over
// blocks of columns instead: each block adds every row in row order, so each
// element of dtable sums its rows in one fixed order whatever the thread
// count, repeated ids included, with no two threads on one element.
#include <algorithm>
#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/cpu/lowp_linear.h"
#include "ops/cpu/parallel.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

// Columns per task of the backward: a cache line of floats.
constexpr int64_t kColumnBlock = 16;

int64_t id_of(const Tensor& ids, int64_t r) {
  return ids.dtype() == DType::kI64 ? ids.data<int64_t>()[r] : ids.data<int32_t>()[r];
}

int64_t id_at(const Tensor& ids, int64_t r, int64_t vocab) {
  const int64_t id = id_of(ids, r);
  SSM_CHECK(id >= 0 && id < vocab, "id ", id, " at ", r, " outside the table's ", vocab, " rows");
  return id;
}

// A table in F16, BF16 or Q8 (a tied head converted at load): rows widened
// to F32 as they are gathered.
void embedding_lowp(Context& ctx, const ops::EmbeddingArgs& a) {
  const int64_t V = a.table.dim(0), D = a.table.dim(1);
  const ops::Rows<float> out(a.out);
  const size_t row_bytes = static_cast<size_t>(D) * dtype_size(a.table.dtype());
  parallel_items(ctx.pool(), a.ids.numel(), D, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t id = id_at(a.ids, r, V);
      LowpWeights w{.dtype = a.table.dtype(),
                    .data = static_cast<const char*>(a.table.raw()) + static_cast<size_t>(id) * row_bytes,
                    .K = D};
      if (a.table.dtype() == DType::kQ8) {
        w.scale_stride = a.table.scales().stride(0);
        w.scales = a.table.scales().data<float>() + id * w.scale_stride;
      }
      lowp_widen_rows(w, 1, out[r]);
      if (a.scale != 1.f)
        for (int64_t d = 0; d < D; ++d) out[r][d] *= a.scale;
    }
  });
}

void embedding(Context& ctx, const ops::EmbeddingArgs& a) {
  const DType t = a.table.dtype();
  if (t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8) return embedding_lowp(ctx, a);
  const int64_t V = a.table.dim(0), D = a.table.dim(1);
  const float* table = a.table.data<float>();
  const ops::Rows<float> out(a.out);
  const float scale = a.scale;
  parallel_items(ctx.pool(), a.ids.numel(), D, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* from = table + id_at(a.ids, r, V) * D;
      if (scale == 1.f) {
        std::memcpy(out[r], from, D * sizeof(float));
        continue;
      }
      for (int64_t d = 0; d < D; ++d) out[r][d] = scale * from[d];
    }
  });
}

void embedding_backward(Context& ctx, const ops::EmbeddingBackwardArgs& a) {
  const int64_t V = a.dtable.dim(0), D = a.dtable.dim(1), R = a.ids.numel();
  for (int64_t r = 0; r < R; ++r) id_at(a.ids, r, V);  // every id checked before any write
  float* dtable = ops::elements<float>(a.dtable);
  const ops::Rows<const float> dout(a.dout);
  const float scale = a.scale;
  const int64_t blocks = (D + kColumnBlock - 1) / kColumnBlock;
  parallel_items(ctx.pool(), blocks, R * kColumnBlock, [&](int64_t b0, int64_t b1) {
    const int64_t c0 = b0 * kColumnBlock, c1 = std::min(D, b1 * kColumnBlock);
    for (int64_t r = 0; r < R; ++r) {
      float* to = dtable + id_of(a.ids, r) * D;
      const float* from = dout[r];
      for (int64_t c = c0; c < c1; ++c) to[c] += scale * from[c];
    }
  });
}

}  // namespace

void add_embedding_kernels(OpTable& t) {
  t.embedding = &embedding;
  t.embedding_backward = &embedding_backward;
}

}  // namespace ssm::cpu
