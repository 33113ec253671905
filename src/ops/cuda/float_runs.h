// W consecutive floats loaded or stored as one piece (16 bytes when W is 4:
// p then 16-byte aligned), and the walk over the chunk states they serve,
// for the scans' backward chunk_pass kernels (ssd_scan_backward.cu,
// mamba3_scan_backward.cu), whose runs are doubles.
// Templates, not `inline` (the CPU emulator's __device__ is inline already),
// as in tf32_warp_tiles.h.
#pragma once

namespace ssm::cuda {

template <int W>
__device__ void load_run(float (&v)[W], const float* p) {
  if constexpr (W == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    for (int w = 0; w < W; ++w) v[w] = p[w];
  }
}

template <int W>
__device__ void store_run(float* p, const double (&v)[W]) {
  if constexpr (W == 4) {
    *reinterpret_cast<float4*>(p) = float4{static_cast<float>(v[0]), static_cast<float>(v[1]),
                                           static_cast<float>(v[2]), static_cast<float>(v[3])};
  } else {
    for (int w = 0; w < W; ++w) p[w] = static_cast<float>(v[w]);
  }
}

// The chunk_pass kernels' two walks over a thread's W entries of the nc
// chunk states (rows PN floats apart): S forward (each chunk's entering
// state: run_s, then run_s = decay run_s + the chunk's own), F backward the
// same from the last chunk. The loads of kAhead chunks of both walks
// (independent of each other) are issued before their stores: a load after
// a store through the same pointer cannot move above it, so one chunk at a
// time cost a memory latency each. run_s and run_f come in as the walks'
// starting values and leave as their ends.
template <int W>
__device__ void walk_chunk_states(float* S, float* F, const float* decay, int64_t nc, int64_t PN, double (&run_s)[W],
                                  double (&run_f)[W]) {
  constexpr int kAhead = 4;
  for (int64_t c0 = 0; c0 < nc; c0 += kAhead) {
    float own_s[kAhead][W], own_f[kAhead][W], d_s[kAhead], d_f[kAhead];
#pragma unroll
    for (int j = 0; j < kAhead; ++j)
      if (c0 + j < nc) {
        load_run<W>(own_s[j], S + (c0 + j) * PN);
        load_run<W>(own_f[j], F + (nc - 1 - c0 - j) * PN);
        d_s[j] = decay[c0 + j];
        d_f[j] = decay[nc - 1 - c0 - j];
      }
#pragma unroll
    for (int j = 0; j < kAhead; ++j)
      if (c0 + j < nc) {
        store_run<W>(S + (c0 + j) * PN, run_s);
        store_run<W>(F + (nc - 1 - c0 - j) * PN, run_f);
#pragma unroll
        for (int w = 0; w < W; ++w) {
          run_s[w] = d_s[j] * run_s[w] + own_s[j][w];
          run_f[w] = d_f[j] * run_f[w] + own_f[j][w];
        }
      }
  }
}

}  // namespace ssm::cuda

namespace ssm::cuda {

// The first `count` (<= 4) of 4 consecutive floats: one 16-byte access when
// `vec` (p then 16-byte aligned and count 4), else one float at a time. For
// kernels that pick 16-byte accesses at run time from their shapes.
template <class T = float>
__device__ void load_quad(float (&v)[4], const T* p, int count, bool vec) {
  if (vec) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    for (int w = 0; w < 4; ++w) v[w] = w < count ? p[w] : 0.f;
  }
}

template <class T = float>
__device__ void store_quad(T* p, const float (&v)[4], int count, bool vec) {
  if (vec) {
    *reinterpret_cast<float4*>(p) = float4{v[0], v[1], v[2], v[3]};
  } else {
    for (int w = 0; w < count; ++w) p[w] = v[w];
  }
}

}  // namespace ssm::cuda
