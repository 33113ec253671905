// adamw on every backend against ref and against PyTorch's AdamW written out
// here in float64 (torch.optim.AdamW, foreach=False: decay, lerp of the first
// moment, addcmul of the second, addcdiv with the bias corrections), over
// several steps, with and without weight decay, resuming at a later step;
// 1 and 2 threads give the same bits.
#include "ssm/ops/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "op_test_support.h"
#include "ssm/ops/elementwise.h"

namespace ssm {
namespace {

struct Hyper {
  double lr, beta1, beta2, eps, weight_decay;
};

// One step of torch.optim.AdamW on doubles, as torch/optim/adamw.py's
// _single_tensor_adamw computes it.
void torch_adamw_step(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                      std::vector<double>& v, const Hyper& h, int64_t step) {
  const double bias_correction1 = 1 - std::pow(h.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(h.beta2, static_cast<double>(step));
  const double step_size = h.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - h.lr * h.weight_decay;                    // param.mul_(1 - lr * wd)
    m[i] += (g[i] - m[i]) * (1 - h.beta1);                // exp_avg.lerp_(grad, 1 - beta1)
    v[i] = v[i] * h.beta2 + (1 - h.beta2) * g[i] * g[i];  // exp_avg_sq.mul_(b2).addcmul_(...)
    const double denom = std::sqrt(v[i]) / bias_correction2_sqrt + h.eps;
    p[i] -= step_size * m[i] / denom;  // param.addcdiv_(..., -step_size)
  }
}

std::vector<double> values(const Tensor& t) {
  const Tensor h = testing::host(t).to_dtype(DType::kF64);
  return {h.data<double>(), h.data<double>() + h.numel()};
}

Tensor tensor_of(const std::vector<double>& v, const Shape& shape) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}

struct State {
  Tensor p, m, v;
};

// `steps` updates from step `first` on ctx, gradients seeded by step.
State run(Context& ctx, const Shape& shape, const Hyper& h, int64_t first, int64_t steps) {
  State s{testing::on(ctx, testing::random_tensor(shape, 1)),
          testing::on(ctx, Tensor::zeros(DType::kF32, shape)),
          testing::on(ctx, Tensor::zeros(DType::kF32, shape))};
  for (int64_t k = 0; k < steps; ++k) {
    Tensor g = testing::random_tensor(shape, 100 + k, -1.f, 1.f);
    g.data<float>()[0] = 0.f;  // a zero gradient: the step leans on eps
    ops::adamw(ctx, {.param = s.p,
                     .grad = testing::on(ctx, g),
                     .m = s.m,
                     .v = s.v,
                     .lr = h.lr,
                     .beta1 = h.beta1,
                     .beta2 = h.beta2,
                     .eps = h.eps,
                     .weight_decay = h.weight_decay,
                     .step = first + k});
  }
  return {testing::host(s.p), testing::host(s.m), testing::host(s.v)};
}

const Hyper kHypers[] = {{1e-2, 0.9, 0.999, 1e-8, 0.1}, {3e-3, 0.8, 0.99, 1e-6, 0.0}};
const Shape kShapes[] = {{1}, {37}, {5, 7}, {100003}};

class AdamW : public ::testing::TestWithParam<std::string> {};

TEST_P(AdamW, MatchesRefAndPyTorchsFormula) {
  for (const Hyper& h : kHypers)
    for (const Shape& shape : kShapes)
      for (int64_t first : {int64_t{1}, int64_t{7}}) {
        SCOPED_TRACE(::testing::Message()
                     << shape << ", wd " << h.weight_decay << ", from step " << first);
        const int64_t steps = 5;
        // PyTorch's AdamW on doubles; the moments start at zero even when
        // resuming: only the bias corrections see the step count.
        std::vector<double> p = values(testing::random_tensor(shape, 1)), m(p.size(), 0.0),
                            v(p.size(), 0.0);
        for (int64_t k = 0; k < steps; ++k) {
          std::vector<double> g = values(testing::random_tensor(shape, 100 + k, -1.f, 1.f));
          g[0] = 0;
          torch_adamw_step(p, g, m, v, h, first + k);
        }
        Context ref("ref", 1);
        const State want = run(ref, shape, h, first, steps);
        // Moments and parameters are stored in float between steps.
        EXPECT_TRUE(testing::close(want.p, tensor_of(p, shape), {1e-6, 1e-7}));
        EXPECT_TRUE(testing::close(want.m, tensor_of(m, shape), {1e-6, 1e-7}));
        EXPECT_TRUE(testing::close(want.v, tensor_of(v, shape), {1e-6, 1e-8}));
        for (int threads : {1, 2}) {
          Context ctx(GetParam(), threads);
          const State got = run(ctx, shape, h, first, steps);
          EXPECT_TRUE(testing::close(got.p, want.p)) << threads << " threads";
          EXPECT_TRUE(testing::close(got.m, want.m));
          EXPECT_TRUE(testing::close(got.v, want.v));
        }
      }
}

TEST_P(AdamW, ThreadCountChangesNoBit) {
  Context one(GetParam(), 1), two(GetParam(), 2);
  const State a = run(one, {100003}, kHypers[0], 1, 3), b = run(two, {100003}, kHypers[0], 1, 3);
  EXPECT_TRUE(testing::identical(a.p, b.p));
  EXPECT_TRUE(testing::identical(a.m, b.m));
  EXPECT_TRUE(testing::identical(a.v, b.v));
}

// The fused update (device backends) against adamw() slice by slice, the
// clip against clip_grad_norm's way (the norm read back, then scale()):
// equal to the bit, over three steps, with slices of every size (one
// empty, one the middle of a tensor), decaying and not, clipped and not.
// All but the second slice also write their bf16 copies (the weight copies
// of bf16 compute), one at an address of 2 mod 8 bytes (no 8-byte stores):
// each the new weights rounded to nearest even, as the conversion makes
// them, and the F32 results as without.
TEST_P(AdamW, FusedSlicesEqualPerSliceUpdatesToTheBit) {
  Context ctx(GetParam(), 2);
  if (!ops::has_adamw_slices(ctx)) GTEST_SKIP() << "no fused update on " << GetParam();
  const std::vector<int64_t> sizes = {37, 1, 0, 100003, 5000};
  int64_t total = 0;
  for (int64_t n : sizes) total += n;  // 105041
  for (double max_norm : {0.0, 1e9, 5.0}) {
    SCOPED_TRACE(::testing::Message() << "max_norm " << max_norm);
    // Two copies of everything: one per-slice, one fused. The last slice
    // is 5000 elements from the 101040th of a longer tensor (16-byte
    // aligned: the kernel's 16-byte moves), the others packed from the
    // first (unaligned after the first: element by element).
    struct Copy {
      Tensor p, m, v;
    };
    std::vector<Copy> copies;
    for (int c = 0; c < 2; ++c)
      copies.push_back({testing::on(ctx, testing::random_tensor({total + 2000}, 1)),
                        testing::on(ctx, testing::random_tensor({total + 2000}, 2, 0.f, 0.1f)),
                        testing::on(ctx, testing::random_tensor({total + 2000}, 3, 0.f, 0.01f))});
    const auto piece = [&](const Tensor& t, size_t k) {
      int64_t begin = k + 1 == sizes.size() ? (1000 + total - sizes.back()) / 4 * 4 : 0;
      for (size_t j = 0; j < k && k + 1 < sizes.size(); ++j) begin += sizes[j];
      return t.slice(0, begin, begin + sizes[k]);
    };
    std::vector<ops::AdamWSlice> table;
    std::vector<Tensor> bf16;  // undefined: none
    int64_t begin = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      Tensor p = piece(copies[1].p, k), m = piece(copies[1].m, k), v = piece(copies[1].v, k);
      const int64_t skew = k == 3 ? 1 : 0;
      bf16.push_back(k == 1 ? Tensor()
                            : testing::on(ctx, Tensor::zeros(DType::kBF16, {sizes[k] + skew}))
                                  .slice(0, skew, sizes[k] + skew));
      table.push_back({.param = static_cast<float*>(p.raw()), .grad = nullptr,
                       .m = static_cast<float*>(m.raw()), .v = static_cast<float*>(v.raw()),
                       .begin = begin, .n = sizes[k], .decays = static_cast<int64_t>(k % 2),
                       .bf16 = bf16.back().defined() ? bf16.back().raw() : nullptr});
      begin += (sizes[k] + 3) / 4 * 4;  // whole quads
    }
    const Hyper h = kHypers[0];
    for (int64_t step = 1; step <= 3; ++step) {
      // Every gradient in one tensor, as Gradients::flat() holds them, at
      // the table's places (zeros between).
      Tensor host_g = testing::random_tensor({begin}, 100 + step, -1.f, 1.f);
      for (size_t k = 0; k < sizes.size(); ++k)
        for (int64_t e = table[k].begin + sizes[k];
             e < (k + 1 < sizes.size() ? table[k + 1].begin : begin); ++e)
          host_g.data<float>()[e] = 0.f;
      const Tensor g = testing::on(ctx, host_g), g_fused = testing::on(ctx, host_g);
      const auto grad = [&](const Tensor& t, size_t k) {
        return t.slice(0, table[k].begin, table[k].begin + sizes[k]);
      };
      for (size_t k = 0; k < sizes.size(); ++k) table[k].grad = grad(g_fused, k).data<float>();
      const int64_t slices = static_cast<int64_t>(table.size());
      Tensor words = Tensor::empty(DType::kI64, {slices * ops::kAdamWSliceWords});
      std::memcpy(words.raw(), table.data(), words.nbytes());
      const Tensor sum_squares = testing::on(ctx, Tensor::zeros(DType::kF64, {1}));
      ops::sum_squares_to(ctx, g_fused, sum_squares);
      ops::adamw_slices(ctx, {.table = testing::on(ctx, words),
                              .slices = slices,
                              .elements = table.back().begin + table.back().n,
                              .lr = h.lr,
                              .beta1 = h.beta1,
                              .beta2 = h.beta2,
                              .eps = h.eps,
                              .weight_decay = h.weight_decay,
                              .step = step,
                              .clip_sum_squares = sum_squares,
                              .max_norm = max_norm});
      // clip_grad_norm's way.
      const double norm = std::sqrt(ops::sum_squares(ctx, g));
      if (!(max_norm <= 0 || norm <= max_norm))
        ops::scale(ctx, g, static_cast<float>(max_norm / (norm + 1e-6)));
      for (size_t k = 0; k < sizes.size(); ++k) {
        if (sizes[k] > 0)
          ops::adamw(ctx, {.param = piece(copies[0].p, k), .grad = grad(g, k),
                           .m = piece(copies[0].m, k), .v = piece(copies[0].v, k), .lr = h.lr,
                           .beta1 = h.beta1, .beta2 = h.beta2, .eps = h.eps,
                           .weight_decay = k % 2 ? h.weight_decay : 0.0, .step = step});
      }
    }
    EXPECT_TRUE(testing::identical(testing::host(copies[1].p), testing::host(copies[0].p)));
    EXPECT_TRUE(testing::identical(testing::host(copies[1].m), testing::host(copies[0].m)));
    EXPECT_TRUE(testing::identical(testing::host(copies[1].v), testing::host(copies[0].v)));
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (!bf16[k].defined() || sizes[k] == 0) continue;
      EXPECT_TRUE(testing::identical(testing::host(bf16[k]), piece(copies[0].p, k).to_dtype(DType::kBF16)))
          << "the bf16 copy of slice " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AdamW, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
