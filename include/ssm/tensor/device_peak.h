// Starting a new peak of a device's memory use (what DeviceMemory::usage
// reports), so that a program can measure one part of its run (ssm bench:
// each weight dtype's model and runs, not the bounds' buffers before
// them). A device's backend registers the function beside its memory
// functions; devices without one keep their peak from the start.
#pragma once

#include "ssm/tensor/device.h"

namespace ssm {

void register_device_peak_reset(DeviceType type, void (*reset)(Device device));
// The peak becomes the bytes held now; false where nothing is registered
// for the device's type (the host: its resident set is the process's).
bool reset_device_peak(Device device);

}  // namespace ssm
