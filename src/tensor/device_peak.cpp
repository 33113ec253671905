#include "ssm/tensor/device_peak.h"

#include <array>
#include <atomic>

namespace ssm {
namespace {

using Reset = void (*)(Device);

std::array<std::atomic<Reset>, 2>& resets() {
  static std::array<std::atomic<Reset>, 2> r{};
  return r;
}

}  // namespace

void register_device_peak_reset(DeviceType type, Reset reset) {
  resets()[static_cast<size_t>(type)].store(reset);
}

bool reset_device_peak(Device device) {
  const Reset reset = resets()[static_cast<size_t>(device.type)].load();
  if (!reset) return false;
  reset(device);
  return true;
}

}  // namespace ssm
