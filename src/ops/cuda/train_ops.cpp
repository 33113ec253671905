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

// A zeroed kPartialRows x cols scratch for the two-stage parameter sums.
float* partial_rows(Context& ctx, int64_t cols) {
  Tensor t = ctx.arena().alloc(DType::kF32, {kPartialRows, cols});
  check(cudaMemsetAsync(t.raw(), 0, t.nbytes(), stream(ctx)), "partial sums (memset)");
  return ops::elements<float>(t);
}

void sum_partials(Context& ctx, const float* partial, int64_t cols, float* dst) {
  launch_column_sums(ConstRows{partial, kPartialRows, cols, cols}, dst, stream(ctx));
}

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
  if (a.dx.defined() && M > 0) {
    const Rows dx = rows_of(a.dx);
    if (N == 0) {
      if (!a.accumulate_dx) launch_fill(dx, 0.f, stream(ctx));
    } else {
      gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, a.W.data<float>(), K, dy.p, dy.stride,
           a.accumulate_dx ? 1.f : 0.f, dx.p, dx.stride, "linear_backward dx (cublasSgemm)");
    }
  }
  if (M == 0) return;
  if (a.dW.defined() && N > 0 && K > 0) {
    const ConstRows x = const_rows_of(a.x);
    gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, x.p, x.stride, dy.p, dy.stride, 1.f,
         ops::elements<float>(a.dW), K, "linear_backward dW (cublasSgemm)");
  }
  if (a.dbias.defined() && N > 0)
    launch_column_sums(dy, ops::elements<float>(a.dbias), stream(ctx));
  check_launch("linear_backward");
}

void rms_norm_backward(Context& ctx, const ops::RmsNormBackwardArgs& a) {
  Arena::Scope scope(ctx.arena());
  const int64_t D = a.x.cols();
  float* partial = a.dw.defined() ? partial_rows(ctx, D) : nullptr;
  launch_rms_norm_backward(const_rows_of(a.x), a.w.defined() ? a.w.data<float>() : nullptr, a.eps,
                           const_rows_of(a.dout), rows_of(a.dx), a.accumulate_dx, partial,
                           stream(ctx));
  if (partial) sum_partials(ctx, partial, D, ops::elements<float>(a.dw));
  check_launch("rms_norm_backward");
}

void gated_rms_norm_backward(Context& ctx, const ops::GatedRmsNormBackwardArgs& a) {
  Arena::Scope scope(ctx.arena());
  const int64_t D = a.y.cols();
  float* partial = a.dw.defined() && a.w.defined() ? partial_rows(ctx, D) : nullptr;
  launch_gated_rms_norm_backward(const_rows_of(a.y), const_rows_of(a.z),
                                 a.w.defined() ? a.w.data<float>() : nullptr, a.group, a.eps,
                                 a.norm_before_gate, const_rows_of(a.dout), rows_of(a.dy),
                                 rows_of(a.dz), partial, stream(ctx));
  if (partial) sum_partials(ctx, partial, D, ops::elements<float>(a.dw));
  check_launch("gated_rms_norm_backward");
}

void conv1d_backward(Context& ctx, const ops::Conv1dBackwardArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  if (K > 17)
    throw Error(
        cat("op 'conv1d_backward': backend 'cuda' takes kernels of at most 17 taps, not ", K));
  if (B * L * C == 0) return;
  Arena::Scope scope(ctx.arena());
  const bool params = a.dweight.defined() || a.dbias.defined();
  Conv1dBackwardLaunch l{const_rows_of(a.in),
                         const_rows_of(a.dout),
                         a.weight.data<float>(),
                         a.bias.defined() ? a.bias.data<float>() : nullptr,
                         rows_of(a.din),
                         ops::elements<float>(ctx.arena().alloc(DType::kF32, {B * L, C})),
                         params ? partial_rows(ctx, C * (K + 1)) : nullptr,
                         B,
                         L,
                         C,
                         K,
                         a.silu};
  launch_conv1d_backward(l, stream(ctx));
  if (params) {
    // The partial rows hold C*K taps, then C biases: sum them all, then add each part.
    Tensor sums = ctx.arena().alloc(DType::kF32, {C * (K + 1)});
    check(cudaMemsetAsync(sums.raw(), 0, sums.nbytes(), stream(ctx)), "conv1d_backward (memset)");
    sum_partials(ctx, l.partial, C * (K + 1), ops::elements<float>(sums));
    if (a.dweight.defined())
      launch_add(rows_of(a.dweight.reshape({C * K})), const_rows_of(sums.slice(0, 0, C * K)), 1.f,
                 stream(ctx));
    if (a.dbias.defined())
      launch_add(rows_of(a.dbias), const_rows_of(sums.slice(0, C * K, C * (K + 1))), 1.f,
                 stream(ctx));
  }
  check_launch("conv1d_backward");
}

void ssd_prepare_backward(Context& ctx, const ops::SsdPrepareBackwardArgs& a) {
  launch_ssd_prepare_backward(const_rows_of(a.dt_raw), a.dt_bias.data<float>(),
                              a.A_log.data<float>(), a.dt_min, a.dt_max, const_rows_of(a.ddt),
                              a.dA.data<float>(), rows_of(a.ddt_raw),
                              ops::elements_or_null<float>(a.ddt_bias),
                              ops::elements_or_null<float>(a.dA_log), stream(ctx));
  check_launch("ssd_prepare_backward");
}

// bytes of host memory to dst in order with the context's work, through the
// pinned staging of copy_from_host_queued: src may go when this returns, and
// the host does not wait for the device.
void copy_from_host(Context& ctx, void* dst, const void* src, size_t bytes, const char* what) {
  if (!resources(ctx).copy_from_host_queued(dst, src, bytes))
    throw Error(cat("cuda: ", what, ": the queued copy from the host is missing"));
}

// The rows grouped by id on the host (ids sorted stably, so rows keep their
// order within an id), then a block per id adds its rows in that order. The
// caller's host copy of the ids, when given, spares reading them back (a
// wait for the device's work).
void embedding_backward(Context& ctx, const ops::EmbeddingBackwardArgs& a) {
  const int64_t R = a.ids.numel(), D = a.dtable.dim(1);
  if (R == 0) return;
  const Tensor ids = a.host_ids.defined()                ? a.host_ids
                     : a.ids.device() == Device::host() ? a.ids
                                                         : a.ids.to(Device::host());
  auto id_at = [&](int64_t r) {
    return ids.dtype() == DType::kI64 ? ids.data<int64_t>()[r] : int64_t{ids.data<int32_t>()[r]};
  };
  std::vector<int64_t> order(static_cast<size_t>(R));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return id_at(x) < id_at(y); });
  std::vector<int64_t> seg, seg_id;
  for (int64_t i = 0; i < R; ++i)
    if (i == 0 || id_at(order[i]) != id_at(order[i - 1])) {
      seg.push_back(i);
      seg_id.push_back(id_at(order[i]));
    }
  const int64_t runs = static_cast<int64_t>(seg_id.size());
  seg.push_back(R);
  // order, seg, seg_id in one buffer: one copy.
  order.insert(order.end(), seg.begin(), seg.end());
  order.insert(order.end(), seg_id.begin(), seg_id.end());
  Arena::Scope scope(ctx.arena());
  Tensor meta = ctx.arena().alloc(DType::kI64, {R + 2 * runs + 1});
  int64_t* m = ops::elements<int64_t>(meta);
  copy_from_host(ctx, m, order.data(), sizeof(int64_t) * order.size(),
                 "embedding_backward (rows by id)");
  launch_embedding_backward(m, m + R, m + R + runs + 1, runs, const_rows_of(a.dout), a.scale,
                            ops::elements<float>(a.dtable), D, stream(ctx));
  check_launch("embedding_backward");
}

// Blocks of rows: logits (block, V) = f head^T by SGEMM, the softmax in
// place (becoming g), then df = g head and dhead += g^T f by SGEMM. The row
// losses' sum comes back to the host once, at the end, or stays on the
// device (sum_out).
double head_cross_entropy(Context& ctx, const ops::HeadLossArgs& a) {
  const int64_t R = a.f.rows(), D = a.f.cols(), V = a.vocab;
  if (R == 0) return 0;
  Arena::Scope scope(ctx.arena());
  const cudaStream_t s = stream(ctx);
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 27) / V, 1, R);
  Tensor logits = ctx.arena().alloc(DType::kF32, {block, V});
  Tensor targets = ctx.arena().alloc(DType::kI64, {R});
  Tensor loss = ctx.arena().alloc(DType::kF64, {R + 1});
  copy_from_host(ctx, targets.raw(), a.targets.data<int64_t>(), sizeof(int64_t) * R,
                 "head_cross_entropy (targets)");
  const ConstRows f = const_rows_of(a.f);
  const float* head = a.head.data<float>();
  const bool grad = a.grad_scale != 0;
  float* lg = ops::elements<float>(logits);
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t n = std::min(block, R - r0);
    const float* fr = f.p + r0 * f.stride;
    // logits (n, V) = f head^T: column-major, logits^T (V, n) = head f^T, with head stored
    // (V, D) row-major = (D, V) column-major, hence op T; f^T is f read column-major (op N).
    gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, V, n, D, head, D, fr, f.stride, 0.f, lg, V,
         "head_cross_entropy logits");
    launch_softmax_xent(Rows{lg, n, V, V}, V, targets.data<int64_t>() + r0, a.grad_scale,
                        ops::elements<double>(loss) + r0, s);
    check_launch("head_cross_entropy (softmax)");
    if (!grad) continue;
    // df (n, D) = g (n, V) head (V, D): df^T = head^T g^T (op N, op N).
    const Rows df = rows_of(a.df);
    gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, D, n, V, head, D, lg, V, 0.f, df.p + r0 * df.stride,
         df.stride, "head_cross_entropy df");
    // dhead (V, D) += g^T f: dhead^T (D, V) += f^T (D, n) g (n, V) (op N, op T).
    if (a.dhead.defined())
      gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, D, V, n, fr, f.stride, lg, V, 1.f,
           ops::elements<float>(a.dhead), D, "head_cross_entropy dhead");
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
  t.rms_norm_backward = &rms_norm_backward;
  t.gated_rms_norm_backward = &gated_rms_norm_backward;
  t.conv1d_backward = &conv1d_backward;
  t.ssd_prepare_backward = &ssd_prepare_backward;
  t.embedding_backward = &embedding_backward;
  t.head_cross_entropy = &head_cross_entropy;
  add_optimizer_kernels(t);
  add_ssd_scan_backward_kernels(t);
  add_mamba3_attention_backward_kernels(t);
  add_hybrid_backward_kernels(t);
}

}  // namespace ssm::cuda
