// Programmatic dependent launch (Hopper): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// kernel before it on the stream is still running, once every block of that
// one has called let_next_kernel_start(); it must then call
// wait_for_previous_kernel() (griddepcontrol.wait: the previous kernel has
// finished and its writes are visible) before it reads anything a kernel
// before it wrote, or writes anything those read. Before the wait it may
// read only what no kernel of the stream writes (weights), or what only the
// same layer's kernels of an earlier decode step wrote (its recurrent and
// convolution state: a step's kernels start once the previous step's have
// finished, ordered by the ids' copy or the graph's replay). A decode step is
// a chain of small latency-bound kernels: each one's launch and weight loads
// then overlap the previous one's tail. Both calls do nothing in a kernel
// launched without the attribute (and in the CPU emulator, which runs
// kernels one after another). Included by .cu files only.
#pragma once

#ifndef SSM_CUDA_EMULATOR
#include <cuda_runtime.h>
#endif

#include <utility>

namespace ssm::cuda {

__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, s>>>(args...), with the attribute when
// `overlap` (CudaResources::overlap_launches).
template <class... Params, class... Args>
void launch_overlapped(bool overlap, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t s, Args&&... args) {
#ifdef SSM_CUDA_EMULATOR
  (void)overlap;
  emu::launch([&] { kernel(args...); }, grid, block, smem, s);
#else
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = s;
  config.attrs = attr;
  config.numAttrs = overlap ? 1 : 0;
  // The launch's error is the caller's check_launch's (cudaGetLastError).
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
#endif
}

}  // namespace ssm::cuda
