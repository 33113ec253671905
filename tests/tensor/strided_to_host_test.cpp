// Tensor::to(host) of a device tensor whose rows are apart (a decode step's
// padded logits: LanguageModel::step): dense on the host, the right
// elements, and one copy of the rows' span rather than a device copy a
// row. The "device" is host memory behind counting functions, registered
// for kCuda for the test's length (this program links no backend that
// would register its own; Device.* expects none after it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ssm/tensor/device.h"
#include "ssm/tensor/tensor.h"

namespace ssm {
namespace {

int g_to_host = 0, g_on_device = 0;

void register_counting_device() {
  DeviceMemory m;
  m.allocate = [](Device, size_t bytes) {
    return std::aligned_alloc(kAlignment,
                              (bytes + kAlignment - 1) / kAlignment * kAlignment + kAlignment);
  };
  m.free = [](Device, void* p) { std::free(p); };
  m.copy_to_host = [](Device, void* dst, const void* src, size_t bytes) {
    ++g_to_host;
    std::memcpy(dst, src, bytes);
  };
  m.copy_from_host = [](Device, void* dst, const void* src, size_t bytes) {
    std::memcpy(dst, src, bytes);
  };
  m.copy_on_device = [](Device, void* dst, const void* src, size_t bytes) {
    ++g_on_device;
    std::memcpy(dst, src, bytes);
  };
  m.fill_zero = [](Device, void* dst, size_t bytes) { std::memset(dst, 0, bytes); };
  register_device_memory(DeviceType::kCuda, m);
}

struct CountingDevice {
  CountingDevice() { register_counting_device(); }
  ~CountingDevice() { register_device_memory(DeviceType::kCuda, DeviceMemory{}); }
};

TEST(StridedToHost, RowsApartComeBackDenseInOneCopy) {
  const CountingDevice device;
  const int64_t B = 5, V = 13, ld = 16;
  Tensor padded = Tensor::empty(DType::kF32, {B, ld});
  for (int64_t i = 0; i < B * ld; ++i) padded.data<float>()[i] = static_cast<float>(i);
  const Tensor on_device = padded.to(Device::cuda()).cols(0, V);
  ASSERT_FALSE(on_device.is_dense());
  ASSERT_EQ(on_device.row_stride(), ld);
  g_to_host = g_on_device = 0;
  const Tensor back = on_device.to(Device::host());
  EXPECT_EQ(g_to_host, 1);
  EXPECT_EQ(g_on_device, 0);
  ASSERT_TRUE(back.is_dense());
  ASSERT_EQ(back.dim(0), B);
  ASSERT_EQ(back.dim(1), V);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t v = 0; v < V; ++v)
      EXPECT_EQ(back.data<float>()[b * V + v], static_cast<float>(b * ld + v));
}

}  // namespace
}  // namespace ssm
