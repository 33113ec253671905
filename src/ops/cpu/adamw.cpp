// AdamW (ops/adamw.h) parallel over blocks of elements: each element's update
// is its own, so any split gives the same bits.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

constexpr int64_t kElementBlock = 4096;

void adamw(Context& ctx, const ops::AdamWArgs& a) {
  const double b1 = a.beta1, b2 = a.beta2, step = static_cast<double>(a.step);
  const double bc1 = 1.0 - std::pow(b1, step), bc2 = 1.0 - std::pow(b2, step);
  // Decoupled decay (PyTorch AdamW): p *= 1 - lr wd, before the Adam step.
  const double decay = 1.0 - a.lr * a.weight_decay, lr = a.lr, eps = a.eps;
  float* p = ops::elements<float>(a.param);
  const float* g = a.grad.data<float>();
  float* m = ops::elements<float>(a.m);
  float* v = ops::elements<float>(a.v);
  const int64_t n = a.param.numel();
  parallel_items(
      ctx.pool(), (n + kElementBlock - 1) / kElementBlock, kElementBlock,
      [&](int64_t first, int64_t last) {
        const int64_t end = std::min(n, last * kElementBlock);
        for (int64_t i = first * kElementBlock; i < end; ++i) {
          m[i] = static_cast<float>(b1 * m[i] + (1.0 - b1) * g[i]);
          v[i] = static_cast<float>(b2 * v[i] + (1.0 - b2) * static_cast<double>(g[i]) * g[i]);
          const double update = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
          p[i] = static_cast<float>(p[i] * decay - lr * update);
        }
      });
}

}  // namespace

void add_optimizer_kernels(OpTable& t) { t.adamw = &adamw; }

}  // namespace ssm::cpu
