// Where a tensor's bytes live, and the memory functions of each kind of
// device. The host is always there; a backend that brings a device (CUDA)
// registers its memory functions when it is first used, so the tensor layer
// knows no device API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ssm {

enum class DeviceType : uint8_t { kHost, kCuda };

struct Device {
  DeviceType type = DeviceType::kHost;
  int index = 0;

  static Device host() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::kCuda, index}; }
  bool is_host() const { return type == DeviceType::kHost; }
  friend bool operator==(const Device&, const Device&) = default;
};

// "host", "cuda:0".
std::string device_str(Device device);

// The memory functions of one device type. Copies between two devices of a
// type, or between the host and one of them; `device` names the non-host
// side (or both sides when both are of this type).
struct DeviceMemory {
  void* (*allocate)(Device device, size_t bytes) = nullptr;  // null when out of memory
  void (*free)(Device device, void* p) = nullptr;
  void (*copy_to_host)(Device device, void* host_dst, const void* src, size_t bytes) = nullptr;
  void (*copy_from_host)(Device device, void* dst, const void* host_src, size_t bytes) = nullptr;
  void (*copy_on_device)(Device device, void* dst, const void* src, size_t bytes) = nullptr;
  void (*fill_zero)(Device device, void* dst, size_t bytes) = nullptr;
  // The most bytes tensors held at once so far, and the device's capacity
  // (null where not tracked).
  void (*usage)(Device device, uint64_t* peak_bytes, uint64_t* total_bytes) = nullptr;
};

// Installs the memory functions of a device type (once, before its first
// tensor). The host's are built in.
void register_device_memory(DeviceType type, const DeviceMemory& memory);
// ssm::Error naming the device when nothing is registered for it.
const DeviceMemory& device_memory(Device device);

// Every allocation is aligned to this (the widest SIMD vector, a cache line).
inline constexpr size_t kAlignment = 64;

}  // namespace ssm
