// AdamW (ops/adamw.h) parallel over blocks of elements, each block a
// vectorised pass (vec_backward.h): each element's update is its own, so any
// split gives the same bits.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/vec_backward.h"
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
        const int64_t i0 = first * kElementBlock, end = std::min(n, last * kElementBlock);
        adamw_update(
            {.b1 = b1, .b2 = b2, .bc1 = bc1, .bc2 = bc2, .decay = decay, .lr = lr, .eps = eps},
            p + i0, g + i0, m + i0, v + i0, end - i0);
      });
}

}  // namespace

void add_optimizer_kernels(OpTable& t) { t.adamw = &adamw; }

}  // namespace ssm::cpu
