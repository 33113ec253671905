// Device memory for DeviceType::kCuda: a caching allocator over cudaMalloc.
// cudaMalloc and cudaFree synchronise the device and cost tens of
// microseconds, so freed blocks are kept by size class and handed out again;
// when cudaMalloc runs out, the cache is released and the allocation tried
// once more. Classes: multiples of 512 bytes up to 1 MiB, of 2 MiB above.
//
// A freed block may still be read by a kernel queued on the stream that used
// it; reuse is safe because every later use is ordered after it: kernels of
// the same context run in order on its stream, and host copies and memsets
// go through the legacy default stream, which waits for blocking streams.
// Two contexts computing at once on different streams could race on a
// reused block: the engine runs one cuda context per computation.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ops/cuda/runtime.h"
#include "ssm/tensor/device.h"

namespace ssm::cuda {
namespace {

size_t size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20;
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= (size_t{1} << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by class
  std::unordered_map<void*, size_t> live;                      // block -> class
  uint64_t live_bytes = 0, peak_bytes = 0;                     // of live blocks (size classes)

  void release_cached() {
    for (auto& [cls, blocks] : free_blocks)
      for (void* p : blocks) cudaFree(p);
    free_blocks.clear();
  }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive static destructors
  return *c;
}

void* allocate(Device, size_t bytes) {
  const size_t cls = size_class(bytes);
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  auto it = c.free_blocks.find(cls);
  if (it != c.free_blocks.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    c.live[p] = cls;
    c.peak_bytes = std::max(c.peak_bytes, c.live_bytes += cls);
    return p;
  }
  void* p = nullptr;
  if (cudaMalloc(&p, cls) != cudaSuccess) {
    cudaGetLastError();
    c.release_cached();
    if (cudaMalloc(&p, cls) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
  }
  c.live[p] = cls;
  c.peak_bytes = std::max(c.peak_bytes, c.live_bytes += cls);
  return p;
}

void release(Device, void* p) {
  if (!p) return;
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  auto it = c.live.find(p);
  if (it == c.live.end()) return;
  c.free_blocks[it->second].push_back(p);
  c.live_bytes -= it->second;
  c.live.erase(it);
}

void copy_to_host(Device, void* host_dst, const void* src, size_t bytes) {
  if (bytes) check(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host");
}
void copy_from_host(Device, void* dst, const void* host_src, size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "copy from the host");
}
void copy_on_device(Device, void* dst, const void* src, size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy on the device");
}
void fill_zero(Device, void* dst, size_t bytes) {
  if (bytes) check(cudaMemset(dst, 0, bytes), "memset");
}
void usage(Device, uint64_t* peak_bytes, uint64_t* total_bytes) {
  {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    *peak_bytes = c.peak_bytes;
  }
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "device memory size");
  *total_bytes = total;
}

}  // namespace

void register_memory() {
  register_device_memory(DeviceType::kCuda, DeviceMemory{&allocate, &release, &copy_to_host, &copy_from_host,
                                                         &copy_on_device, &fill_zero, &usage});
}

}  // namespace ssm::cuda
