// The host side of the backward ops, the fused head loss and the gradient
// norm's sum on the GPU (AdamW: optimizer_ops.cpp): workspaces from the
// context's arena, cuBLAS for the products, the
// launchers of launch_train.h for the rest.
//
// Products, row-major read as column-major (see linear.cpp):
//   dx (M, K) = dy (M, N) W (N, K):   dx^T = W^T dy^T     (op N, op N)
//   dW (N, K) += dy^T x:              dW^T += x^T dy      (op N, op T)
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cuda/gemm_f32.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_train.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

void gemm(Context& ctx, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc, const char* what) {
  gemm_f32(ctx, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc, what);
}

void linear_backward(Context& ctx, const ops::LinearBackwardArgs& a) {
  const int64_t M = a.dy.rows(), N = a.dy.cols(), K = a.W.dim(1);
  if (a.W.dtype() != DType::kF32)
    throw Error(cat("op 'linear_backward': backend 'cuda' takes F32 weights, not ",
                    dtype_name(a.W.dtype())));
  const ConstRows dy = const_rows_of(a.dy);
  const bool want_dx = a.dx.defined() && M > 0, want_dW = a.dW.defined() && M > 0 && N > 0 && K > 0;
  // Under bf16 compute both products read dy rounded to bf16: round it
  // once for the two (dense, N x M column-major), not once a product.
  Arena::Scope scope(ctx.arena());
  const void* dy16 = resources(ctx).bf16_compute && N > 0 && (want_dx || want_dW)
                         ? bf16_copy(ctx, dy.p, N, M, dy.stride)
                         : nullptr;
  if (want_dx) {
    const Rows dx = rows_of(a.dx);
    const float beta = a.accumulate_dx ? 1.f : 0.f;
    if (N == 0) {
      if (!a.accumulate_dx) launch_fill(dx, 0.f, stream(ctx));
    } else if (dy16) {
      gemm_f32_bf16(ctx, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, a.W.data<float>(), K, dy16, N, beta, dx.p,
                    dx.stride, "linear_backward dx (bf16 GEMM)");
    } else {
      gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, a.W.data<float>(), K, dy.p, dy.stride, beta, dx.p,
           dx.stride, "linear_backward dx (cublasSgemm)");
    }
  }
  if (M == 0) return;
  if (want_dW) {
    const ConstRows x = const_rows_of(a.x);
    if (dy16)
      gemm_f32_bf16(ctx, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, x.p, x.stride, dy16, N, 1.f,
                    ops::elements<float>(a.dW), K, "linear_backward dW (bf16 GEMM)");
    else
      gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, x.p, x.stride, dy.p, dy.stride, 1.f,
           ops::elements<float>(a.dW), K, "linear_backward dW (cublasSgemm)");
  }
  if (a.dbias.defined() && N > 0)
    launch_column_sums(dy, ops::elements<float>(a.dbias), stream(ctx));
  check_launch("linear_backward");
}

// bytes of host memory to dst in order with the context's work, through the
// pinned staging of copy_from_host_queued: src may go when this returns, and
// the host does not wait for the device. A context without the staging (the
// CPU emulator's) copies synchronously. `refill` makes the bytes from a
// later step's inputs when a recorded training step replays.
void copy_from_host(Context& ctx, void* dst, const void* src, size_t bytes, const char* what,
                    const BackendResources::StepInputFill& refill = {}) {
  BackendResources* r = ctx.resources();
  if (r && (refill ? r->copy_step_input_queued(dst, src, bytes, refill)
                   : r->copy_from_host_queued(dst, src, bytes)))
    return;
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), what);
}

// embedding_meta_words(R) words for launch_embedding_backward: the rows
// grouped by id (sorted stably, so rows keep their order within an id).
void rows_by_id(const Tensor& ids, int64_t* meta) {
  const int64_t R = ids.numel();
  auto id_at = [&](int64_t r) {
    return ids.dtype() == DType::kI64 ? ids.data<int64_t>()[r] : int64_t{ids.data<int32_t>()[r]};
  };
  int64_t *order = meta, *seg = meta + R, *seg_id = meta + 2 * R + 1;
  std::fill(meta, meta + embedding_meta_words(R), int64_t{0});
  std::iota(order, order + R, int64_t{0});
  std::stable_sort(order, order + R, [&](int64_t x, int64_t y) { return id_at(x) < id_at(y); });
  int64_t runs = 0;
  for (int64_t i = 0; i < R; ++i)
    if (i == 0 || id_at(order[i]) != id_at(order[i - 1])) {
      seg[runs] = i;
      seg_id[runs++] = id_at(order[i]);
    }
  seg[runs] = R;
  meta[3 * R + 1] = runs;
}

// The rows grouped by id on the host, then a block per id adds its rows in
// that order. The caller's host copy of the ids, when given, spares reading
// them back (a wait for the device's work). In a recorded training step
// the ids are the step's: a replay groups the next step's.
void embedding_backward(Context& ctx, const ops::EmbeddingBackwardArgs& a) {
  const int64_t R = a.ids.numel(), D = a.dtable.dim(1);
  if (R == 0) return;
  const Tensor ids = a.host_ids.defined()                ? a.host_ids
                     : a.ids.device() == Device::host() ? a.ids
                                                         : a.ids.to(Device::host());
  std::vector<int64_t> meta(static_cast<size_t>(embedding_meta_words(R)));
  rows_by_id(ids, meta.data());
  Arena::Scope scope(ctx.arena());
  Tensor on = ctx.arena().alloc(DType::kI64, {embedding_meta_words(R)});
  int64_t* m = ops::elements<int64_t>(on);
  const BackendResources::StepInputFill refill = [R](const BackendResources::StepInputs& in, void* out) {
    SSM_CHECK(in.ids.numel() == R, "a recorded step's ids have ", R, " rows, not ", in.ids.numel());
    rows_by_id(in.ids, static_cast<int64_t*>(out));
  };
  copy_from_host(ctx, m, meta.data(), sizeof(int64_t) * meta.size(), "embedding_backward (rows by id)",
                 refill);
  launch_embedding_backward(m, R, const_rows_of(a.dout), a.scale, ops::elements<float>(a.dtable), D,
                            stream(ctx));
  check_launch("embedding_backward");
}

// Blocks of rows: logits (block, W) = f head^T by SGEMM, the softmax in
// place (becoming g), then df = g head and dhead += g^T f by SGEMM. The row
// losses' sum comes back to the host once, at the end, or stays on the
// device (sum_out).
//
// W: the vocabulary rounded up to 8 columns where the head (and dhead) have
// those rows, so that every matrix's contiguous extent and leading
// dimension is a whole number of 16-byte pieces: at V = 50277 the three
// bf16 products fell back to cuBLAS's sm75 "align1" kernels (3.9 ms a step
// at 2048 x 768 x 50277 on an H100, about four times the sm90 ones). The
// padding columns' logits are the padded head rows' (finite weights); their
// gradient is zero, so they add exact zeros to df and to dhead's padded rows.
// Under bf16 compute the softmax writes g in bf16, the products' input,
// instead of F32 that each product would round again.
double head_cross_entropy(Context& ctx, const ops::HeadLossArgs& a) {
  const int64_t R = a.f.rows(), D = a.f.cols(), V = a.vocab;
  if (R == 0) return 0;
  Arena::Scope scope(ctx.arena());
  const cudaStream_t s = stream(ctx);
  const int64_t padded = (V + 7) / 8 * 8;
  const bool pad = a.head.dim(0) >= padded && (!a.dhead.defined() || a.dhead.dim(0) >= padded);
  const int64_t W = pad ? padded : V, ld = padded;
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 27) / ld, 1, R);
  const bool bf16 = resources(ctx).bf16_compute;
  Tensor logits = ctx.arena().alloc(DType::kF32, {block, ld});
  Tensor g16 = bf16 ? ctx.arena().alloc(DType::kBF16, {block, ld}) : Tensor();
  Tensor loss = ctx.arena().alloc(DType::kF64, {R + 1});
  // Targets already on the device (a training step queues them there) are read in place.
  Tensor targets = a.targets;
  if (a.targets.device() != ctx.device()) {
    targets = ctx.arena().alloc(DType::kI64, {R});
    copy_from_host(ctx, targets.raw(), a.targets.data<int64_t>(), sizeof(int64_t) * R,
                   "head_cross_entropy (targets)");
  }
  const ConstRows f = const_rows_of(a.f);
  const float* head = a.head.data<float>();
  const bool grad = a.grad_scale != 0;
  float* lg = ops::elements<float>(logits);
  // g (n, W), ld apart: the softmax's output, F32 in place or bf16.
  auto product_with_g = [&](cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const float* A,
                            int64_t lda, float beta, float* C, int64_t ldc, const char* what) {
    if (bf16) gemm_f32_bf16(ctx, CUBLAS_OP_N, tb, m, n, k, A, lda, g16.raw(), ld, beta, C, ldc, what);
    else gemm(ctx, CUBLAS_OP_N, tb, m, n, k, A, lda, lg, ld, beta, C, ldc, what);
  };
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t n = std::min(block, R - r0);
    const float* fr = f.p + r0 * f.stride;
    // logits (n, W) = f head^T: column-major, logits^T (W, n) = head f^T, with head stored
    // (W, D) row-major = (D, W) column-major, hence op T; f^T is f read column-major (op N).
    gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, W, n, D, head, D, fr, f.stride, 0.f, lg, ld,
         "head_cross_entropy logits");
    launch_softmax_xent(Rows{lg, n, W, ld}, V, targets.data<int64_t>() + r0, a.grad_scale,
                        ops::elements<double>(loss) + r0, grad && bf16 ? g16.raw() : nullptr, ld, s);
    check_launch("head_cross_entropy (softmax)");
    if (!grad) continue;
    // df (n, D) = g (n, W) head (W, D): df^T = head^T g^T (op N, op N).
    const Rows df = rows_of(a.df);
    product_with_g(CUBLAS_OP_N, D, n, W, head, D, 0.f, df.p + r0 * df.stride, df.stride,
                   "head_cross_entropy df");
    // dhead (W, D) += g^T f: dhead^T (D, W) += f^T (D, n) g (n, W) (op N, op T).
    if (a.dhead.defined())
      product_with_g(CUBLAS_OP_T, D, W, n, fr, f.stride, 1.f, ops::elements<float>(a.dhead), D,
                     "head_cross_entropy dhead");
  }
  double* l = ops::elements<double>(loss);
  launch_sum_doubles(l, R, a.sum_out.defined() ? ops::elements<double>(a.sum_out) : l + R, s);
  check_launch("head_cross_entropy (sum)");
  if (a.sum_out.defined()) return 0;
  const Tensor back = loss.to(Device::host());
  if (a.row_loss.defined())
    std::copy(back.data<double>(), back.data<double>() + R, ops::elements<double>(a.row_loss));
  return back.data<double>()[R];
}

// The gradient norm sums every gradient at once (optimizer.cpp): a dense
// tensor is summed over many blocks; anything else (and anything small) by
// the one-block kernel of elementwise.cu.
void sum_squares_to(Context& ctx, const Tensor& t, const Tensor& out) {
  double* o = ops::elements<double>(out);
  if (!t.is_dense() || t.numel() < (int64_t{1} << 20)) {
    launch_sum_squares(const_rows_of(t), o, stream(ctx));
  } else {
    Arena::Scope scope(ctx.arena());
    Tensor partial = ctx.arena().alloc(DType::kF64, {kSumBlocks});
    launch_sum_squares_dense(t.data<float>(), t.numel(), ops::elements<double>(partial), o,
                             stream(ctx));
  }
  check_launch("sum_squares");
}

double sum_squares(Context& ctx, const Tensor& t) {
  Arena::Scope scope(ctx.arena());
  Tensor out = ctx.arena().alloc(DType::kF64, {1});
  sum_squares_to(ctx, t, out);
  double result = 0;
  check(cudaMemcpy(&result, out.raw(), sizeof(double), cudaMemcpyDeviceToHost),
        "sum_squares (read back)");
  return result;
}

}  // namespace

void add_train_kernels(OpTable& t) {
  t.sum_squares = &sum_squares;
  t.sum_squares_to = &sum_squares_to;
  t.linear_backward = &linear_backward;
  t.embedding_backward = &embedding_backward;
  t.head_cross_entropy = &head_cross_entropy;
  add_optimizer_kernels(t);
  add_norm_conv_backward_kernels(t);
  add_ssd_scan_backward_kernels(t);
  add_mamba3_attention_backward_kernels(t);
  add_hybrid_backward_kernels(t);
}

}  // namespace ssm::cuda
