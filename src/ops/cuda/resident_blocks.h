// The blocks of a kernel the device holds at once (the occupancy API's
// count per multiprocessor times the multiprocessors), for the looping
// decode kernels (conv_ssd.cu's ssd_step, mamba3_scan.cu's scan step) whose
// grid is one wave that walks every tile. Asked once per (kernel, device,
// block, shared memory) and kept: a recorded decode step asks nothing. 0
// where the API fails (the caller then launches a block a tile). In the
// emulator, whose blocks run one after another, 7: each block of the tests'
// many-sequence cases then takes tiles of several sequences, partial ones
// among them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

namespace ssm::cuda {

template <class Kernel>
int64_t resident_blocks(Kernel kernel, int threads, size_t smem) {
#ifdef SSM_CUDA_EMULATOR
  (void)kernel, (void)threads, (void)smem;
  return 7;
#else
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int, size_t>, int64_t> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), device, threads, smem);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess)
    sms = per_sm = 0;
  return known[key] = int64_t{sms} * per_sm;
#endif
}

}  // namespace ssm::cuda
