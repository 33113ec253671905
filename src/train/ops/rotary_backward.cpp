#include "ssm/train/ops/rotary_backward.h"

#include <cmath>

namespace ssm::ops {

void rope_backward(float* dqkv, int64_t ld, int64_t batch, int64_t length, int64_t heads,
                   int64_t kv_heads, int64_t head_dim, int64_t rotary_dim, const float* inv_freq,
                   ThreadPool& pool) {
  const int64_t half = rotary_dim / 2;
  if (half == 0) return;
  pool.parallel_for(batch * length, [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t pos = row % length;
      float* dq = dqkv + row * ld;
      float* dk = dq + heads * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        // The angle as the forward forms it (the product in double).
        const double angle = static_cast<double>(pos) * inv_freq[i];
        const float c = static_cast<float>(std::cos(angle)),
                    s = static_cast<float>(std::sin(angle));
        // Rotating the gradient by -angle: the pair's own rotation with sin negated.
        for (int64_t h = 0; h < heads; ++h)
          rotate_pair(dq + h * head_dim, RotaryPairs::kHalves, half, i, c, -s);
        for (int64_t h = 0; h < kv_heads; ++h)
          rotate_pair(dk + h * head_dim, RotaryPairs::kHalves, half, i, c, -s);
      }
    }
  });
}

}  // namespace ssm::ops
