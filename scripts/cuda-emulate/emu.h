// A small CPU emulator of CUDA blocks, for checking a kernel's logic on a
// machine without a GPU (scripts/cuda-emulate/run.sh): every thread of a
// block is a fiber (ucontext) of one OS thread, __syncthreads and the warp
// shuffles are barriers that yield to a round-robin scheduler, shared
// memory starts as NaN bytes. Blocks run one after another. It checks
// indices, barriers and reductions, not CUDA's memory model or speed.
#pragma once
#define SSM_CUDA_EMULATOR 1  // overlap_launch.h launches through emu::launch
#include <cuda_runtime_api.h>  // dim3, uint3, cudaStream_t (host header)
#include <ucontext.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>
using std::max;
using std::min;

namespace emu {
// Every CUDA thread of a block is a fiber (ucontext) of one OS thread;
// barriers yield to a round-robin scheduler. Blocks run one after another.
struct Barrier {
  unsigned expected = 0, count = 0, gen = 0;
};
struct Fiber {
  ucontext_t ctx;
  bool done = false;
};
inline std::vector<std::vector<char>>& stacks() {
  static std::vector<std::vector<char>> s;
  return s;
}
inline uint3 t_thread, t_block;
inline dim3 t_bdim, t_gdim;
struct Block {
  std::vector<Fiber> fibers;
  Barrier bar;
  std::vector<Barrier> warp_bar;
  std::vector<std::array<uint64_t, 32>> slots;
  std::vector<std::array<std::array<float, 8>, 32>> wide;  // warp_gather's
  std::vector<char> dyn;
  ucontext_t main;
  unsigned cur = 0;
  std::function<void()> task;
};
inline Block* g_block = nullptr;
inline void* dyn_smem() { return g_block->dyn.data(); }
inline void yield() { swapcontext(&g_block->fibers[g_block->cur].ctx, &g_block->main); }
inline void arrive_and_wait(Barrier& b) {
  const unsigned gen = b.gen;
  if (++b.count == b.expected) {
    b.count = 0;
    ++b.gen;
    return;
  }
  while (b.gen == gen) yield();
}
inline void drop(Barrier& b) {
  --b.expected;
  if (b.count > 0 && b.count == b.expected) {
    b.count = 0;
    ++b.gen;
  }
}
inline void fiber_entry() {
  g_block->task();
  drop(g_block->bar);
  drop(g_block->warp_bar[g_block->cur / 32]);
  g_block->fibers[g_block->cur].done = true;
  swapcontext(&g_block->fibers[g_block->cur].ctx, &g_block->main);
}
template <typename F>
void launch(F f, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t = nullptr) {
  const unsigned n = block.x * block.y * block.z;
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      Block b;
      b.task = [&] { f(); };
      b.bar.expected = n;
      const unsigned warps = (n + 31) / 32;
      b.warp_bar.resize(warps);
      for (unsigned w = 0; w < warps; ++w) b.warp_bar[w].expected = std::min(32u, n - 32 * w);
      b.slots.resize(warps);
      b.wide.resize(warps);
      b.dyn.resize(smem + 16);
      std::fill(b.dyn.begin(), b.dyn.end(), static_cast<char>(0xff));  // NaN bytes
      b.fibers.resize(n);
      g_block = &b;
      for (unsigned t = 0; t < n; ++t) {
        Fiber& fb = b.fibers[t];
        if (stacks().size() <= t) stacks().emplace_back(128 * 1024);
        getcontext(&fb.ctx);
        fb.ctx.uc_stack.ss_sp = stacks()[t].data();
        fb.ctx.uc_stack.ss_size = stacks()[t].size();
        fb.ctx.uc_link = nullptr;
        makecontext(&fb.ctx, fiber_entry, 0);
      }
      t_block = uint3{bx, by, 0};
      t_bdim = block;
      t_gdim = grid;
      for (bool any = true; any;) {
        any = false;
        for (unsigned t = 0; t < n; ++t) {
          if (b.fibers[t].done) continue;
          any = true;
          b.cur = t;
          t_thread = uint3{t, 0, 0};
          swapcontext(&b.main, &b.fibers[t].ctx);
        }
      }
      g_block = nullptr;
    }
}
inline void syncthreads() { arrive_and_wait(g_block->bar); }
inline void syncwarp() { arrive_and_wait(g_block->warp_bar[t_thread.x / 32]); }
template <typename T>
T shfl_xor(unsigned, T v, int o) {
  const unsigned lane = t_thread.x % 32, w = t_thread.x / 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  g_block->slots[w][lane] = bits;
  arrive_and_wait(g_block->warp_bar[w]);
  const uint64_t other = g_block->slots[w][lane ^ static_cast<unsigned>(o)];
  arrive_and_wait(g_block->warp_bar[w]);
  T r;
  std::memcpy(&r, &other, sizeof(T));
  return r;
}
// The value of lane src_lane(lane) of the warp (the shuffles).
template <typename T, typename F>
T shfl_from(T v, F src_lane) {
  const unsigned lane = t_thread.x % 32, w = t_thread.x / 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  g_block->slots[w][lane] = bits;
  arrive_and_wait(g_block->warp_bar[w]);
  const uint64_t other = g_block->slots[w][src_lane(lane)];
  arrive_and_wait(g_block->warp_bar[w]);
  T r;
  std::memcpy(&r, &other, sizeof(T));
  return r;
}
template <typename T>
T shfl_up(unsigned, T v, unsigned o) {
  return shfl_from(v, [o](unsigned lane) { return lane >= o ? lane - o : lane; });
}
template <typename T>
T shfl_idx(unsigned, T v, int src) {
  return shfl_from(v, [src](unsigned) { return static_cast<unsigned>(src) % 32; });
}
// Every lane's 8 values (a warp-wide matrix product's fragments).
inline std::array<std::array<float, 8>, 32> warp_gather(const std::array<float, 8>& mine) {
  const unsigned lane = t_thread.x % 32, w = t_thread.x / 32;
  g_block->wide[w][lane] = mine;
  arrive_and_wait(g_block->warp_bar[w]);
  const auto all = g_block->wide[w];
  arrive_and_wait(g_block->warp_bar[w]);
  return all;
}
}  // namespace emu
// CUDA's device maths that C++ lacks.
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
// Blocks run one after another: atomics are plain updates, fences nothing.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p += v;
  return old;
}
#define __threadfence() ((void)0)
// Loads through L2 only: one memory here.
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
#define threadIdx emu::t_thread
#define blockIdx emu::t_block
#define blockDim emu::t_bdim
#define gridDim emu::t_gdim
#define __syncthreads() emu::syncthreads()
#define __syncwarp(...) emu::syncwarp()
// The width argument (xor within aligned groups of lanes) changes nothing for
// offsets below it, the only use.
#define __shfl_xor_sync(m, v, o, ...) emu::shfl_xor(m, v, o)
#define __shfl_up_sync(m, v, o, ...) emu::shfl_up(m, v, o)
#define __shfl_sync(m, v, src, ...) emu::shfl_idx(m, v, src)
#undef __global__
#define __global__
#undef __device__
#define __device__ inline
#define __launch_bounds__(...)
#undef __forceinline__
#define __forceinline__
#define cudaFuncSetAttribute(...) ((void)0)
