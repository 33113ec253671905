#include "ssm/tensor/device.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ssm/core/error.h"

namespace ssm {
namespace {

void* host_allocate(Device, size_t bytes) {
  return std::aligned_alloc(kAlignment, (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment);
}
void host_free(Device, void* p) { std::free(p); }
void host_copy(Device, void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void host_zero(Device, void* dst, size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
}

constexpr size_t kTypes = 2;

struct Registry {
  std::mutex mutex;
  std::array<DeviceMemory, kTypes> memory{
      DeviceMemory{&host_allocate, &host_free, &host_copy, &host_copy, &host_copy, &host_zero},
      DeviceMemory{}};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::string device_str(Device device) {
  switch (device.type) {
    case DeviceType::kHost: return "host";
    case DeviceType::kCuda: return "cuda:" + std::to_string(device.index);
  }
  return "?";
}

void register_device_memory(DeviceType type, const DeviceMemory& memory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.memory[static_cast<size_t>(type)] = memory;
}

const DeviceMemory& device_memory(Device device) {
  Registry& r = registry();
  // Entries are written once, before the first tensor of their device.
  const DeviceMemory& m = r.memory[static_cast<size_t>(device.type)];
  if (!m.allocate) throw Error(cat("no memory functions for device ", device_str(device),
                                   " (its backend is not built in or not initialised)"));
  return m;
}

}  // namespace ssm
