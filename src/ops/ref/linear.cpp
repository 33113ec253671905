// y = x W^T + bias and its backward, one output at a time, sums in double.
// W of any stored type is read one element at a time at its exact value.
#include "ops/ref/linear.h"

#include <cstring>
#include <vector>

#include "ops/tensor_data.h"
#include "ops/ref/kernels.h"
#include "ssm/tensor/convert.h"

namespace ssm::ref {
namespace {

using ops::elements;
using ops::elements_or_null;

// Row n of W, widened to double (memcpy: W may be mapped from a file at any
// alignment).
void weight_row(const Tensor& W, int64_t n, std::vector<double>& out) {
  const int64_t K = W.dim(1);
  const size_t size = dtype_size(W.dtype());
  const char* row = static_cast<const char*>(W.raw()) + static_cast<size_t>(n * K) * size;
  out.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    const char* e = row + static_cast<size_t>(k) * size;
    switch (W.dtype()) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, e, sizeof f);
        out[k] = f;
        break;
      }
      case DType::kF64:
        std::memcpy(&out[k], e, sizeof(double));
        break;
      case DType::kF16:
      case DType::kBF16: {
        float f;
        (W.dtype() == DType::kF16 ? f16_to_f32 : bf16_to_f32)(e, &f, 1);
        out[k] = f;
        break;
      }
      case DType::kQ8: {
        const Tensor& s = W.scales();
        out[k] = static_cast<double>(s.data<float>()[n * s.stride(0)]) * static_cast<int8_t>(*e);
        break;
      }
      default:
        throw Error(cat("op 'linear': backend 'ref' reads no ", dtype_name(W.dtype()), " weights"));
    }
  }
}

}  // namespace

template <typename T>
void linear(Context&, const ops::LinearArgs& a) {
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  const int64_t ldx = a.x.row_stride(), ldy = a.y.row_stride();
  const T* x = a.x.data<T>();
  const T* bias = elements_or_null<T>(a.bias);
  T* y = elements<T>(a.y);
  std::vector<double> w;
  for (int64_t n = 0; n < N; ++n) {
    weight_row(a.W, n, w);
    for (int64_t m = 0; m < M; ++m) {
      double acc = bias ? static_cast<double>(bias[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(x[m * ldx + k]) * w[k];
      T& out = y[m * ldy + n];
      out = static_cast<T>(a.accumulate ? out + acc : acc);
    }
  }
}

template <typename T>
void linear_backward(Context&, const ops::LinearBackwardArgs& a) {
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  const int64_t ldx = a.x.row_stride(), lddy = a.dy.row_stride();
  const T* x = a.x.data<T>();
  const T* W = a.W.data<T>();
  const T* dy = a.dy.data<T>();
  if (T* dx = elements_or_null<T>(a.dx)) {
    const int64_t lddx = a.dx.row_stride();
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        double s = 0;
        for (int64_t n = 0; n < N; ++n) s += static_cast<double>(dy[m * lddy + n]) * W[n * K + k];
        T& out = dx[m * lddx + k];
        out = static_cast<T>(a.accumulate_dx ? out + s : s);
      }
  }
  if (T* dW = elements_or_null<T>(a.dW))
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        double s = 0;
        for (int64_t m = 0; m < M; ++m) s += static_cast<double>(dy[m * lddy + n]) * x[m * ldx + k];
        dW[n * K + k] = static_cast<T>(dW[n * K + k] + s);
      }
  if (T* dbias = elements_or_null<T>(a.dbias))
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t m = 0; m < M; ++m) s += dy[m * lddy + n];
      dbias[n] = static_cast<T>(dbias[n] + s);
    }
}

template void linear<float>(Context&, const ops::LinearArgs&);
template void linear<double>(Context&, const ops::LinearArgs&);
template void linear_backward<float>(Context&, const ops::LinearBackwardArgs&);
template void linear_backward<double>(Context&, const ops::LinearBackwardArgs&);

void add_linear_kernels(OpTable& t) {
  t.linear = &linear<float>;
  t.linear_backward = &linear_backward<float>;
}

}  // namespace ssm::ref
