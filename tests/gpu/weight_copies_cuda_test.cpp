// The bf16 weight copies that the fused AdamW writes along with the
// weights (ops/cuda/weight_copies.h, WeightCopies::for_update), against the
// conversion kernel (label gpu). Apart from train_cuda_test.cpp, whose
// golden gradients the CPU emulator also runs (TRAIN_TEST): this one calls
// the runtime's kernels and copies, which the emulator does not build.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "ops/cuda/launch.h"
#include "ops/cuda/runtime.h"
#include "ssm/ops/adamw.h"
#include "support/backends.h"
#include "support/random.h"

namespace ssm {
namespace {

// The fused AdamW writes a weight's bf16 copy along with the weight
// (WeightCopies::for_update): the bytes the conversion kernel makes of the
// updated weights, served by the next product's copy_of without a
// conversion; a write from outside the update (changed() alone) makes the
// copy stale again, and the next use converts it.
TEST(GpuBf16WeightCopies, TheUpdatesCopyIsTheConversionKernels) {
  const auto ctx = std::make_unique<Context>("cuda", 1);
  ASSERT_TRUE(ctx->resources()->set_bf16_compute(true));
  cuda::CudaResources& r = cuda::resources(*ctx);
  const int64_t rows = 48, cols = 66, n = rows * cols;  // a product's (rows, cols), ld = rows
  Tensor w = testing::random_tensor({cols, rows}, 5).to(ctx->device());
  Tensor g = testing::random_tensor({n}, 6, -1.f, 1.f).to(ctx->device());
  Tensor m = Tensor::zeros(DType::kF32, {n}, ctx->device()), v = Tensor::zeros(DType::kF32, {n}, ctx->device());
  const float* src = w.data<float>();
  r.keep_weight_copies(w.raw(), w.nbytes());
  EXPECT_EQ(ctx->resources()->bf16_copy_for_update(src, n), nullptr) << "no product used it yet";
  ASSERT_NE(r.weight_copies.copy_of(src, rows, cols, rows, r.device, r.stream), nullptr);
  void* bf16 = ctx->resources()->bf16_copy_for_update(src, n);
  ASSERT_NE(bf16, nullptr);
  const ops::AdamWSlice slice{.param = static_cast<float*>(w.raw()), .grad = g.data<float>(),
                              .m = static_cast<float*>(m.raw()), .v = static_cast<float*>(v.raw()),
                              .begin = 0, .n = n, .decays = 1, .bf16 = bf16};
  Tensor table = Tensor::empty(DType::kI64, {ops::kAdamWSliceWords});
  std::memcpy(table.raw(), &slice, sizeof slice);
  ops::adamw_slices(*ctx, {.table = table.to(ctx->device()), .slices = 1, .elements = n, .lr = 1e-2,
                           .weight_decay = 0.1, .step = 1});
  r.weights_changed();
  const int64_t made = r.weight_copies.made();
  EXPECT_EQ(r.weight_copies.copy_of(src, rows, cols, rows, r.device, r.stream), bf16);
  EXPECT_EQ(r.weight_copies.made(), made) << "converted again";
  EXPECT_EQ(r.weight_copies.updated(), 1);
  Tensor want = Tensor::empty(DType::kBF16, {n}, ctx->device());
  cuda::launch_to_16bit(cuda::ConstRows{src, cols, rows, rows}, want.raw(), true, 1, r.stream);
  Tensor got = Tensor::empty(DType::kBF16, {n});
  ASSERT_EQ(cudaMemcpy(got.raw(), bf16, got.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(got.raw(), want.to(Device::host()).raw(), got.nbytes()), 0);
  // Weights written from outside: stale, converted at the next use.
  r.weights_changed();
  EXPECT_EQ(r.weight_copies.copy_of(src, rows, cols, rows, r.device, r.stream), bf16);
  EXPECT_EQ(r.weight_copies.made(), made + 1);
  r.forget_weights();
}

}  // namespace
}  // namespace ssm
