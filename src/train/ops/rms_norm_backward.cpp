#include "ssm/train/ops/rms_norm_backward.h"

#include <cmath>
#include <vector>

#include "ssm/train/ops/activations_backward.h"

namespace ssm::ops {
namespace {

// Rows per block of the weight-gradient partial sums: fixed, so the order of
// the sums does not depend on the thread count.
constexpr int64_t kRowBlock = 32;

// Sums per-block partials (blocks x dim) into dw in block order.
void reduce_blocks(const std::vector<double>& partial, int64_t blocks, int64_t dim, float* dw) {
  for (int64_t i = 0; i < dim; ++i) {
    double s = 0;
    for (int64_t b = 0; b < blocks; ++b) s += partial[b * dim + i];
    dw[i] += static_cast<float>(s);
  }
}

// One group: given v (the normed input) and g = w * dout, writes dv and adds
// v * r * dout to dwp. Returns nothing; r from the forward's formula.
void norm_group_backward(const float* v, const float* w, const float* dout, int64_t n, float eps,
                         float* dv, double* dwp) {
  double ss = 0, dot = 0;
  for (int64_t i = 0; i < n; ++i) {
    ss += static_cast<double>(v[i]) * v[i];
    dot += static_cast<double>(v[i]) * w[i] * dout[i];
  }
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  const double c = dot * r * r * r / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    dv[i] = static_cast<float>(r * w[i] * dout[i] - v[i] * c);
    if (dwp) dwp[i] += static_cast<double>(dout[i]) * v[i] * r;
  }
}

}  // namespace

void rms_norm_backward(const float* x, const float* w, const float* dy, int64_t rows, int64_t dim,
                       float eps, float* dx, bool accumulate_dx, float* dw, ThreadPool& pool) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> partial(dw ? blocks * dim : 0, 0.0);
  pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    std::vector<float> tmp(dim);
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t r = b * kRowBlock; r < std::min(rows, (b + 1) * kRowBlock); ++r) {
        float* out = accumulate_dx ? tmp.data() : dx + r * dim;
        norm_group_backward(x + r * dim, w, dy + r * dim, dim, eps, out,
                            dw ? partial.data() + b * dim : nullptr);
        if (accumulate_dx)
          for (int64_t i = 0; i < dim; ++i) dx[r * dim + i] += tmp[i];
      }
  });
  if (dw) reduce_blocks(partial, blocks, dim, dw);
}

void gated_rms_norm_backward(const GatedRmsNormBackwardArgs& a, ThreadPool& pool) {
  const int64_t rows = a.rows, dim = a.dim, group = a.group;
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> partial(a.dw ? blocks * dim : 0, 0.0);
  pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    std::vector<float> v(dim), dv(dim), g(dim);
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t r = b * kRowBlock; r < std::min(rows, (b + 1) * kRowBlock); ++r) {
        const float* y = a.y + r * dim;
        const float* z = a.z + r * a.ldz;
        const float* dout = a.dout + r * dim;
        float* dy = a.dy + r * dim;
        float* dz = a.dz + r * a.lddz;
        double* dwp = a.dw ? partial.data() + b * dim : nullptr;
        if (!a.w) {  // out = y * silu(z)
          for (int64_t i = 0; i < dim; ++i) {
            dy[i] = dout[i] * silu(z[i]);
            dz[i] = dout[i] * y[i] * silu_grad(z[i]);
          }
          continue;
        }
        if (!a.norm_before_gate) {
          // v = y * silu(z); out = norm(v) * w
          for (int64_t i = 0; i < dim; ++i) v[i] = y[i] * silu(z[i]);
          for (int64_t g0 = 0; g0 < dim; g0 += group)
            norm_group_backward(v.data() + g0, a.w + g0, dout + g0, group, a.eps, dv.data() + g0,
                                dwp ? dwp + g0 : nullptr);
          for (int64_t i = 0; i < dim; ++i) {
            dy[i] = dv[i] * silu(z[i]);
            dz[i] = dv[i] * y[i] * silu_grad(z[i]);
          }
        } else {
          // out = norm(y) * w * silu(z)
          for (int64_t i = 0; i < dim; ++i) g[i] = dout[i] * silu(z[i]);
          for (int64_t g0 = 0; g0 < dim; g0 += group) {
            double ss = 0;
            for (int64_t i = g0; i < g0 + group; ++i) ss += static_cast<double>(y[i]) * y[i];
            const double rr = 1.0 / std::sqrt(ss / static_cast<double>(group) + a.eps);
            for (int64_t i = g0; i < g0 + group; ++i)
              dz[i] = static_cast<float>(dout[i] * y[i] * rr * a.w[i] * silu_grad(z[i]));
            norm_group_backward(y + g0, a.w + g0, g.data() + g0, group, a.eps, dy + g0,
                                dwp ? dwp + g0 : nullptr);
          }
        }
      }
  });
  if (a.dw) reduce_blocks(partial, blocks, dim, a.dw);
}

}  // namespace ssm::ops
