// The op layer itself: every call reaches the kernel of its context's
// backend, or fails naming the op and the backend; arguments on the wrong
// device or of the wrong shape are refused before any kernel runs.
#include <gtest/gtest.h>

#include "ssm/ops/op_table.h"
#include "ssm/ops/backend.h"
#include "ssm/ops/elementwise.h"
#include "ssm/ops/linear.h"

namespace ssm {
namespace {

// A backend with no kernels at all.
class EmptyBackend : public Backend {
 public:
  std::string_view name() const override { return "empty"; }
  Device device() const override { return Device::host(); }
  const OpTable& ops() const override { return table_; }

 private:
  OpTable table_;
};

TEST(Dispatch, AnOpTheBackendLacksIsAnErrorNamingBoth) {
  EmptyBackend empty;
  Context ctx(empty, 1);
  Tensor x = Tensor::zeros(DType::kF32, {2, 3}), W = Tensor::zeros(DType::kF32, {4, 3});
  Tensor y = Tensor::zeros(DType::kF32, {2, 4});
  try {
    ops::linear(ctx, {.x = x, .W = W, .y = y});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'linear'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'empty'"), std::string::npos) << e.what();
  }
}

TEST(Dispatch, ShapesAreCheckedBeforeTheKernel) {
  EmptyBackend empty;
  Context ctx(empty, 1);
  Tensor x = Tensor::zeros(DType::kF32, {2, 3}), W = Tensor::zeros(DType::kF32, {4, 5});
  Tensor y = Tensor::zeros(DType::kF32, {2, 4});
  try {
    ops::linear(ctx, {.x = x, .W = W, .y = y});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("width"), std::string::npos) << e.what();
  }
}

TEST(Dispatch, UnknownBackendNamesTheBuiltInOnes) {
  try {
    Context ctx("nope", 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ref"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
}

TEST(Dispatch, BuiltInBackendsAreRefFirst) {
  const std::vector<std::string> names = backend_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "ref");
  EXPECT_EQ(&find_backend("cpu"), &find_backend("cpu"));
}

}  // namespace
}  // namespace ssm
