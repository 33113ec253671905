// The causal depthwise convolution as its formula: each output a sum over
// the K taps in double, inputs before t = 0 read from the state.
#include "ops/ref/conv1d.h"

#include <vector>

#include "ops/tensor_data.h"
#include "ops/ref/kernels.h"
#include "ops/scalar_math.h"

namespace ssm::ref {
namespace {

using ops::elements;
using ops::elements_or_null;

// Pre-activation of out[b, t, c]: bias + sum_k w[c, k] in[t - K + 1 + k],
// with in[s < 0] = state[s + K - 1] (zero without a state).
template <typename T>
double pre_activation(const ops::Conv1dArgs& a, int64_t b, int64_t t, int64_t c) {
  const int64_t L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2), ld = a.in.row_stride();
  const T* in = a.in.data<T>() + b * L * ld;
  const T* w = a.weight.data<T>() + c * K;
  const T* state = a.state.defined() ? a.state.data<T>() + b * (K - 1) * C : nullptr;
  double acc = a.bias.defined() ? static_cast<double>(a.bias.data<T>()[c]) : 0.0;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t s = t - K + 1 + k;
    const double v = s >= 0 ? static_cast<double>(in[s * ld + c])
                            : (state ? static_cast<double>(state[(s + K - 1) * C + c]) : 0.0);
    acc += w[k] * v;
  }
  return acc;
}

}  // namespace

template <typename T>
void conv1d(Context&, const ops::Conv1dArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t ld_in = a.in.row_stride(), ld_out = a.out.row_stride();
  T* out = elements<T>(a.out);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const double pre = pre_activation<T>(a, b, t, c);
        out[(b * L + t) * ld_out + c] = static_cast<T>(a.silu ? ops::silu(pre) : pre);
      }
  T* state = elements_or_null<T>(a.state);
  if (!state) return;
  // The new state: the last K-1 inputs of (old state, then this sequence).
  std::vector<T> next(static_cast<size_t>((K - 1) * C));
  for (int64_t b = 0; b < B; ++b) {
    const T* in = a.in.data<T>() + b * L * ld_in;
    T* st = state + b * (K - 1) * C;
    for (int64_t s = 0; s < K - 1; ++s) {
      const int64_t t = L - (K - 1) + s;
      for (int64_t c = 0; c < C; ++c)
        next[s * C + c] = t >= 0 ? in[t * ld_in + c] : st[(t + K - 1) * C + c];
    }
    std::copy(next.begin(), next.end(), st);
  }
}

template <typename T>
void conv1d_backward(Context&, const ops::Conv1dBackwardArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t ld_in = a.in.row_stride(), ld_dout = a.dout.row_stride();
  const int64_t ld_din = a.din.row_stride();
  const ops::Conv1dArgs fwd{.in = a.in, .weight = a.weight, .bias = a.bias, .silu = a.silu};
  const T* w = a.weight.data<T>();
  T* din = elements<T>(a.din);
  T* dweight = elements_or_null<T>(a.dweight);
  T* dbias = elements_or_null<T>(a.dbias);
  std::vector<double> dpre(static_cast<size_t>(L));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const T* in = a.in.data<T>() + b * L * ld_in + c;
      for (int64_t t = 0; t < L; ++t) {
        const double g = a.dout.data<T>()[(b * L + t) * ld_dout + c];
        dpre[t] = a.silu ? g * ops::silu_grad(pre_activation<T>(fwd, b, t, c)) : g;
      }
      // in[s] feeds out[s + K - 1 - k] through tap k.
      for (int64_t s = 0; s < L; ++s) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t t = s + K - 1 - k;
          if (t < L) acc += w[c * K + k] * dpre[t];
        }
        din[(b * L + s) * ld_din + c] = static_cast<T>(acc);
      }
      for (int64_t k = 0; k < K && dweight; ++k) {
        double acc = 0;
        for (int64_t t = K - 1 - k; t < L; ++t) acc += dpre[t] * in[(t - K + 1 + k) * ld_in];
        dweight[c * K + k] = static_cast<T>(dweight[c * K + k] + acc);
      }
      if (dbias) {
        double acc = 0;
        for (int64_t t = 0; t < L; ++t) acc += dpre[t];
        dbias[c] = static_cast<T>(dbias[c] + acc);
      }
    }
}

template void conv1d<float>(Context&, const ops::Conv1dArgs&);
template void conv1d<double>(Context&, const ops::Conv1dArgs&);
template void conv1d_backward<float>(Context&, const ops::Conv1dBackwardArgs&);
template void conv1d_backward<double>(Context&, const ops::Conv1dBackwardArgs&);

void add_conv1d_kernels(OpTable& t) {
  t.conv1d = &conv1d<float>;
  t.conv1d_backward = &conv1d_backward<float>;
}

}  // namespace ssm::ref
