// adamw on every backend against ref and against PyTorch's AdamW written out
// here in float64 (torch.optim.AdamW, foreach=False: decay, lerp of the first
// moment, addcmul of the second, addcdiv with the bias corrections), over
// several steps, with and without weight decay, resuming at a later step;
// 1 and 2 threads give the same bits.
#include "ssm/ops/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

#include "op_test_support.h"

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

INSTANTIATE_TEST_SUITE_P(Backends, AdamW, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
