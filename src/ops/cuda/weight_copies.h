// Mixed-precision training's bf16 weight copies (gemm_f32.cpp): an F32
// matrix that lies inside a range registered as weights keeps its bf16 copy
// from its first use until the weights change (the optimiser's step), where
// products otherwise round every input into the arena at every use: in a
// training step each weight is used by the forward, the backward's dx and,
// for the head, by every block of rows twice. Exact: the copy is made by the
// same kernel from the same F32 bytes, so it holds the bf16 values a copy
// at use would.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "ssm/tensor/tensor.h"

namespace ssm::cuda {

class WeightCopies {
 public:
  // [begin, begin + bytes) holds weights: its bytes change only before a
  // changed() call (or after forget()).
  void keep(const void* begin, size_t bytes);
  // Every copy stale: the next use of each makes it again (in place).
  void changed() { ++generation_; }
  // No weights, no copies.
  void forget();

  // The dense bf16 copy of the column-major (rows, cols) F32 matrix at src
  // (leading dimension ld), made on stream s when missing or stale; nullptr
  // when the matrix is not wholly inside one registered range.
  const void* copy_of(const float* src, int64_t rows, int64_t cols, int64_t ld, int device,
                      cudaStream_t s);

  int64_t made() const { return made_; }
  int64_t reused() const { return reused_; }

 private:
  struct Copy {
    Tensor bf16;
    uint64_t generation = 0;
  };
  using Key = std::tuple<const float*, int64_t, int64_t, int64_t>;  // src, rows, cols, ld
  std::map<uintptr_t, uintptr_t> ranges_;                           // begin -> end
  std::map<Key, Copy> copies_;
  uint64_t generation_ = 1;
  int64_t made_ = 0, reused_ = 0;
};

}  // namespace ssm::cuda
