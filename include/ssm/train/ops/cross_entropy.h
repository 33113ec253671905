// Next-token cross-entropy over the real vocabulary (SPEC §6), fused with the
// tied (or untied) output head so that the (rows, V) logits exist only one
// block of rows at a time.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

// In place over logits (rows, V): per row with target >= 0, returns the sum
// of -log softmax(logits)[target] and, when grad_scale != 0, replaces the row
// by grad_scale * (softmax - onehot(target)); rows with target < 0 become 0.
// row_loss (rows, may be null) receives each row's loss (0 without target).
double cross_entropy_rows(float* logits, int64_t rows, int64_t V, const int64_t* targets,
                          double grad_scale, double* row_loss, ThreadPool& pool);

struct HeadLossArgs {
  int64_t rows = 0, D = 0, V = 0;  // V: the real vocabulary
  const float* f = nullptr;        // (rows, D) final-norm outputs
  const float* head = nullptr;     // (>= V, D) embedding or lm_head
  const int64_t* targets = nullptr;  // (rows), -1 where no loss is taken
  double grad_scale = 0;             // 0: loss only
  float* df = nullptr;               // (rows, D) overwritten when grad_scale != 0
  float* dhead = nullptr;            // (V, D) accumulated, may be null
  double* row_loss = nullptr;        // (rows) optional
  int64_t block_rows = 0;            // rows of logits at a time (0: about 16 MB)
};

// Sum of the row losses; logits are formed in blocks of rows.
double head_cross_entropy(const HeadLossArgs& a, ThreadPool& pool);

}  // namespace ssm::ops
