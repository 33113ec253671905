// AdamW (ops/adamw.h) element by element: the moments stored in float, the
// step computed in double from the stored moments.
#include <cmath>

#include "ops/ref/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

void adamw(Context&, const ops::AdamWArgs& a) {
  const double b1 = a.beta1, b2 = a.beta2, step = static_cast<double>(a.step);
  const double bc1 = 1.0 - std::pow(b1, step), bc2 = 1.0 - std::pow(b2, step);
  // Decoupled decay: the parameter shrinks before the Adam step moves it.
  const double decay = 1.0 - a.lr * a.weight_decay;
  float* p = ops::elements<float>(a.param);
  const float* g = a.grad.data<float>();
  float* m = ops::elements<float>(a.m);
  float* v = ops::elements<float>(a.v);
  for (int64_t i = 0; i < a.param.numel(); ++i) {
    const double gi = g[i];
    m[i] = static_cast<float>(b1 * m[i] + (1.0 - b1) * gi);
    v[i] = static_cast<float>(b2 * v[i] + (1.0 - b2) * gi * gi);
    const double update = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + a.eps);
    p[i] = static_cast<float>(p[i] * decay - a.lr * update);
  }
}

}  // namespace

void add_optimizer_kernels(OpTable& t) { t.adamw = &adamw; }

}  // namespace ssm::ref
