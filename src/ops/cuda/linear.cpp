// Few rows (M <= 8: decode steps) through linear_skinny.cu (norm_linear_ops.cpp's
// linear_few_rows), exact in F32
// for every weight type. More through cuBLAS: F32 weights in full F32 (SGEMM), BF16 and
// F16 weights on the tensor cores (the activations split into 16-bit pieces
// in a workspace, products accumulated in F32). Q8 is refused by name.
//
// Row-major y (M, N) = x (M, K) W (N, K)^T is, read column-major,
// y^T = W^T x^T: one GEMM with W transposed, no copies of strided rows.
#include "ops/cuda/gemm_f32.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch_linear.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {
namespace {

void linear(Context& ctx, const ops::LinearArgs& a) {
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  if (M == 0 || N == 0) return;
  CudaResources& r = resources(ctx);
  const ConstRows x = const_rows_of(a.x);
  const Rows y = rows_of(a.y);
  // Few rows (decode steps): one pass over W at full width (linear_skinny.cu).
  if (linear_few_rows(ctx, a)) return;
  const float alpha = 1.f, beta = a.accumulate ? 1.f : 0.f;
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  switch (a.W.dtype()) {
    case DType::kF32:
      // SGEMM, or the bf16 tensor cores when the context computes in bf16.
      gemm_f32(ctx, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, a.W.data<float>(), k, x.p, x.stride, beta, y.p, y.stride,
               "linear (cublasSgemm)");
      break;
    case DType::kBF16:
    case DType::kF16: {
      // The activations as a sum of 16-bit pieces, one GEMM each (smallest
      // first) into y: three bf16 or two f16 pieces hold every F32 bit, so
      // the result is the F32 product of the stored weights; one piece (the
      // activations rounded, as the reference's kernels do) when the
      // context asks for speed (CudaResources::round_activations).
      const bool bf16 = a.W.dtype() == DType::kBF16;
      const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
      const int pieces = r.round_activations ? 1 : (bf16 ? 3 : 2);
      Arena::Scope scope(ctx.arena());
      Tensor xh = ctx.arena().alloc(a.W.dtype(), {pieces * M, K});
      launch_to_16bit(x, xh.raw(), bf16, pieces, r.stream);
      check_launch("linear (activations to 16 bits)");
      const size_t piece_bytes = static_cast<size_t>(M * K) * dtype_size(a.W.dtype());
      // cuBLAS takes kernels for unaligned operands (align1) for the whole
      // product when m is not a multiple of 8, e.g. the 130m head's 50,277
      // columns (156 us of a 1,177 us batch-64 step on an H200): the aligned
      // columns go alone, the few left after them by a second, small GEMM.
      const int aligned = m > 8 && y.stride % 8 == 0 ? m / 8 * 8 : m;
      const auto columns = [&](int c0, int c1) {
        const char* w = static_cast<const char*>(a.W.raw()) + static_cast<size_t>(c0) * k * dtype_size(a.W.dtype());
        for (int i = pieces - 1; i >= 0; --i) {
          const float b = i == pieces - 1 ? beta : 1.f;
          check(cublasGemmEx(r.blas, CUBLAS_OP_T, CUBLAS_OP_N, c1 - c0, n, k, &alpha, w, type, k,
                             static_cast<const char*>(xh.raw()) + i * piece_bytes, type, k, &b, y.p + c0,
                             CUDA_R_32F, static_cast<int>(y.stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "linear (cublasGemmEx)");
        }
      };
      columns(0, aligned);
      if (aligned < m) columns(aligned, m);
      break;
    }
    default:
      throw Error(cat("op 'linear': backend 'cuda' has no kernel for ", dtype_name(a.W.dtype()),
                      " weights (F32, BF16 and F16 are supported)"));
  }
  if (a.bias.defined()) {
    launch_add_bias(y, a.bias.data<float>(), r.stream);
    check_launch("linear (bias)");
  }
}

}  // namespace

void add_linear_kernels(OpTable& t) { t.linear = &linear; }

}  // namespace ssm::cuda
