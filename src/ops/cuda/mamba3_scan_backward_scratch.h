// The scratch of mamba3_scan's backward on the GPU, shared by its general
// kernels (mamba3_scan_backward.cu) and its tensor-core ones
// (mamba3_scan_backward_tiles.cu), which write and read the same buffers:
// nc = ceil(L / T) chunks per (b, h), in floats,
//   states  B H nc P N: a chunk's own end state, then S_in
//   dstates B H nc P N: a chunk's own start gradient, then F
//   decay   B H nc:     exp(cs_last) of each chunk
//   dstart  B H P N:    dS'_{-1}
//   steps   B H L 3:    dw, dwd, g per step
// Device functions are templates, not `inline` (the CPU emulator's
// __device__ is inline already; a plain one would be defined in each
// object), as in tf32_warp_tiles.h.
#pragma once

#include "ops/cuda/launch_mamba3_attention_backward.h"

namespace ssm::cuda::mamba3_backward {

struct Scratch {
  float *states, *dstates, *decay, *dstart, *steps;
};

__host__ __device__ constexpr int64_t chunks(const Mamba3ScanBackwardLaunch& a) {
  return (a.L + a.T - 1) / a.T;
}

template <class Launch>  // Mamba3ScanBackwardLaunch (a template: defined in a header without inline)
__device__ Scratch scratch_of(const Launch& a) {
  const int64_t BH = a.B * a.H, nc = chunks(a), PN = a.P * a.N;
  Scratch s;
  s.states = a.scratch;
  s.dstates = s.states + BH * nc * PN;
  s.decay = s.dstates + BH * nc * PN;
  s.dstart = s.decay + BH * nc;
  s.steps = s.dstart + BH * PN;
  return s;
}

}  // namespace ssm::cuda::mamba3_backward
