// The mask of ops::dropout, one definition for the host and the GPU: the
// splitmix64 generator, whose i-th output is a fixed function of (seed, i),
// so that any element's bit is computed alone, by any thread, in any order.
//   key      = sm(sm(sm(seed) ^ step) ^ site),  sm(x) = mix(x + G)
//   bits(i)  = mix(key + (i + 1) G)               the (i+1)-th output from key
//   keep(i)  = (bits(i) >> 32) >= threshold,      threshold = floor(p 2^32)
//   y        = keep ? x * scale : 0,              scale = float(1 / (1 - p))
// Changing any of this changes which elements a resumed run drops: the op
// tests pin it against a scalar transcription.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SSM_DROPOUT_HD __host__ __device__
#else
#define SSM_DROPOUT_HD
#endif

namespace ssm::ops::dropout_mask {

inline constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // splitmix64's increment

// splitmix64's finaliser.
SSM_DROPOUT_HD inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t key(uint64_t seed, uint64_t step, uint64_t site) {
  const auto sm = [](uint64_t x) { return mix(x + kGolden); };
  return sm(sm(sm(seed) ^ step) ^ site);
}

// Elements whose top 32 bits are below this are dropped (p < 1).
inline uint32_t threshold(double p) { return static_cast<uint32_t>(std::ldexp(p, 32)); }

inline float scale(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

SSM_DROPOUT_HD inline bool keep(uint64_t key, uint64_t index, uint32_t threshold) {
  return static_cast<uint32_t>(mix(key + (index + 1) * kGolden) >> 32) >= threshold;
}

// What the kernels need, computed once on the host.
struct Draw {
  uint64_t key;
  uint32_t threshold;
  float scale;
};

inline Draw draw(double p, uint64_t seed, uint64_t step, uint64_t site) {
  return {key(seed, step, site), threshold(p), scale(p)};
}

}  // namespace ssm::ops::dropout_mask
