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
// Two contexts computing at once on different streams of one device could
// race on a reused block: the engine runs one cuda context per device and
// computation. Each device has its own cache (a block belongs to the
// device it was allocated on), and every function makes the tensor's device
// current for its call, so that tensors of several GPUs can be made, copied
// and freed from any thread (ssm serve keeps a model on each). A recorded
// training step's blocks stay in its private pool (graph_pool.h).
#include <algorithm>
#include <cstring>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ops/cuda/graph_pool.h"
#include "ops/cuda/runtime.h"
#include "ssm/core/error.h"
#include "ssm/tensor/device.h"
#include "ssm/tensor/device_peak.h"

namespace ssm::cuda {
namespace {

size_t size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20;
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= (size_t{1} << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

}  // namespace

struct GraphPool {
  int device = 0;
  cudaStream_t stream = nullptr;  // being captured
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by class
};

namespace {

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by class
  std::unordered_map<void*, size_t> live;                      // block -> class
  uint64_t live_bytes = 0, peak_bytes = 0;                     // of live blocks (size classes)
  // graph_pool.h: the pool capturing now, and the blocks each pool owns.
  GraphPool* capturing = nullptr;
  std::unordered_map<void*, GraphPool*> pooled;

  // A free block of class cls: the capturing pool's own first, then the
  // cache's (which the pool then owns); nullptr when neither has one.
  void* take(size_t cls) {
    if (capturing) {
      auto& own = capturing->free_blocks[cls];
      if (!own.empty()) {
        void* p = own.back();
        own.pop_back();
        return p;
      }
    }
    auto it = free_blocks.find(cls);
    if (it == free_blocks.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    if (capturing) pooled[p] = capturing;
    return p;
  }

  void release_cached() {
    for (auto& [cls, blocks] : free_blocks)
      for (void* p : blocks) cudaFree(p);
    free_blocks.clear();
  }
};

constexpr int kMaxDevices = 64;

Cache& cache(Device device) {
  SSM_CHECK(device.index >= 0 && device.index < kMaxDevices, "cuda device index ", device.index,
            " out of range");
  // Never destroyed: tensors may outlive static destructors.
  static Cache* caches = new Cache[kMaxDevices];
  return caches[device.index];
}

void* allocate(Device device, size_t bytes) {
  const size_t cls = size_class(bytes);
  Cache& c = cache(device);
  const DeviceGuard on(device.index);
  std::lock_guard lock(c.mutex);
  if (void* p = c.take(cls)) {
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
  if (c.capturing) c.pooled[p] = c.capturing;
  c.live[p] = cls;
  c.peak_bytes = std::max(c.peak_bytes, c.live_bytes += cls);
  return p;
}

void release(Device device, void* p) {
  if (!p) return;
  Cache& c = cache(device);
  std::lock_guard lock(c.mutex);
  auto it = c.live.find(p);
  if (it == c.live.end()) return;
  auto owner = c.pooled.find(p);
  if (owner == c.pooled.end() && c.capturing) owner = c.pooled.emplace(p, c.capturing).first;
  if (owner != c.pooled.end()) owner->second->free_blocks[it->second].push_back(p);
  else c.free_blocks[it->second].push_back(p);
  c.live_bytes -= it->second;
  c.live.erase(it);
}

// On the tensor's device: the legacy default stream of that device waits
// for its contexts' (blocking) streams, so a copy sees their results.
void copy_to_host(Device device, void* host_dst, const void* src, size_t bytes) {
  if (!bytes) return;
  const DeviceGuard on(device.index);
  check(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host");
}
void copy_from_host(Device device, void* dst, const void* host_src, size_t bytes) {
  if (!bytes) return;
  const DeviceGuard on(device.index);
  check(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "copy from the host");
}
// The stream a recorded step is being captured from on `device`, or null
// (graph_pool.h: fills and copies on the device go there meanwhile).
cudaStream_t capturing_stream(Device device) {
  Cache& c = cache(device);
  std::lock_guard lock(c.mutex);
  return c.capturing ? c.capturing->stream : nullptr;
}

// Both sides on `device` (tensors on two GPUs go through the host).
void copy_on_device(Device device, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  const DeviceGuard on(device.index);
  if (cudaStream_t s = capturing_stream(device))
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "copy on the device (recorded)");
  else
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy on the device");
}
void fill_zero(Device device, void* dst, size_t bytes) {
  if (!bytes) return;
  const DeviceGuard on(device.index);
  if (cudaStream_t s = capturing_stream(device)) check(cudaMemsetAsync(dst, 0, bytes, s), "memset (recorded)");
  else check(cudaMemset(dst, 0, bytes), "memset");
}
void usage(Device device, uint64_t* peak_bytes, uint64_t* total_bytes) {
  const DeviceGuard on(device.index);
  {
    Cache& c = cache(device);
    std::lock_guard lock(c.mutex);
    *peak_bytes = c.peak_bytes;
  }
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "device memory size");
  *total_bytes = total;
}

void reset_peak(Device device) {
  Cache& c = cache(device);
  std::lock_guard lock(c.mutex);
  c.peak_bytes = c.live_bytes;
}

}  // namespace

GraphPool* begin_graph_pool(int device, cudaStream_t stream) {
  Cache& c = cache(Device::cuda(device));
  std::lock_guard lock(c.mutex);
  SSM_CHECK(!c.capturing, "cuda device ", device, " is already capturing a recorded step");
  c.capturing = new GraphPool{.device = device, .stream = stream};
  return c.capturing;
}

void end_graph_pool_capture(GraphPool* pool) {
  Cache& c = cache(Device::cuda(pool->device));
  std::lock_guard lock(c.mutex);
  for (const auto& [p, cls] : c.live) c.pooled.emplace(p, pool);
  if (c.capturing == pool) c.capturing = nullptr;
}

void release_graph_pool(GraphPool* pool) {
  if (!pool) return;
  Cache& c = cache(Device::cuda(pool->device));
  std::lock_guard lock(c.mutex);
  if (c.capturing == pool) c.capturing = nullptr;
  for (auto it = c.pooled.begin(); it != c.pooled.end();)
    it = it->second == pool ? c.pooled.erase(it) : std::next(it);
  for (auto& [cls, blocks] : pool->free_blocks)
    c.free_blocks[cls].insert(c.free_blocks[cls].end(), blocks.begin(), blocks.end());
  delete pool;
}

void register_memory() {
  register_device_memory(DeviceType::kCuda, DeviceMemory{&allocate, &release, &copy_to_host, &copy_from_host,
                                                         &copy_on_device, &fill_zero, &usage});
  register_device_peak_reset(DeviceType::kCuda, &reset_peak);
}

}  // namespace ssm::cuda
