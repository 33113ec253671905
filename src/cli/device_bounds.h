// What a device backend's speed is measured against, measured in the same
// run on the device through the backend's own ops (so the bounds see what
// the model's ops can see): the product rate of its linear op on bf16
// tensor cores, and its memory bandwidth (a large device-to-device copy);
// and the device's memory in use. On the host the same calls measure the
// host: an F32 product rate, a copy through the cpu ops, the resident set.
#pragma once

#include <cstdint>

#include "ssm/ops/context.h"
#include "ssm/tensor/device.h"

namespace ssm::cli {

// The n of measure_linear_flops's product.
inline constexpr int64_t kDeviceLinearN = 8192, kHostLinearN = 1024;

// FLOP/s of y (n, n) = x (n, n) W^T through the backend's linear op: on a
// device with bf16 compute (the tensor-core rate; n = kDeviceLinearN), on
// the host in F32 (kHostLinearN). Leaves the context's bf16 compute at
// `bf16_after`.
double measure_linear_flops(Context& ctx, bool bf16_after);

// Bytes/s moved by ops::copy of `bytes` into another buffer of ctx's
// device, read and written bytes both counted (as a copy benchmark of a
// GPU's memory does): best of a few passes, each waited for.
double measure_copy_bytes_per_s(Context& ctx, uint64_t bytes);

// Peak bytes of `device`'s tensors since the last reset_memory_peak (the
// process's resident set on the host) and what bounds them (the device's
// memory; 0 on the host).
void memory_use(Device device, uint64_t* peak, uint64_t* capacity);
// Starts a new peak for memory_use: the resident set's on the host, the
// tensors' bytes held now on a device whose memory functions can.
void reset_memory_peak(Device device);

}  // namespace ssm::cli
