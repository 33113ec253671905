// Mixed-precision training's bf16 weight copies (gemm_f32.cpp): an F32
// matrix that lies inside a range registered as weights keeps its bf16 copy
// from its first use until the weights change (the optimiser's step), where
// products otherwise round every input into the arena at every use: in a
// training step each weight is used by the forward, the backward's dx and,
// for the head, by every block of rows twice. Exact: the copy is made by the
// same kernel from the same F32 bytes, so it holds the bf16 values a copy
// at use would.
//
// The fused AdamW writes the copies of the weights it updates itself
// (for_update): a weight run whose products use a dense copy gets one bf16
// copy of the whole run, which the update rounds each new value into (the
// same round to nearest even as the conversion kernel), so that the next
// forward converts nothing: 195 conversion launches a Mamba-3 step of the
// 130m model under --bf16, 1.6 ms on an H100, mostly launch overhead.
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
  // Every copy stale: the next use of each makes it again (in place);
  // except the whole runs handed to an update (for_update) since the last
  // call: that update wrote them with the weights.
  void changed();
  // No weights, no copies.
  void forget();

  // The dense bf16 copy of the n F32 weights at begin, for the caller's
  // update to write along with them before the next changed(); made where
  // the products use a dense copy of weights inside the run (whose place
  // it then takes). nullptr where there is none to keep: the run is not
  // inside a registered range, no product uses it, or it overlaps another
  // whole run.
  void* for_update(const float* begin, int64_t n, int device);

  // The dense bf16 copy of the column-major (rows, cols) F32 matrix at src
  // (leading dimension ld), made on stream s when missing or stale; nullptr
  // when the matrix is not wholly inside one registered range.
  const void* copy_of(const float* src, int64_t rows, int64_t cols, int64_t ld, int device,
                      cudaStream_t s);

  int64_t made() const { return made_; }
  int64_t reused() const { return reused_; }
  // Whole runs taken fresh from an update, each time (no conversion).
  int64_t updated() const { return updated_; }

 private:
  struct Copy {
    Tensor bf16;
    uint64_t generation = 0;
  };
  using Key = std::tuple<const float*, int64_t, int64_t, int64_t>;  // src, rows, cols, ld
  std::map<uintptr_t, uintptr_t> ranges_;                           // begin -> end
  std::map<Key, Copy> copies_;
  struct Whole {
    const float* begin = nullptr;
    int64_t n = 0;
    Tensor bf16;  // (n) BF16
    uint64_t generation = 0;
    bool in_update = false;  // handed to an update since the last changed()
  };
  std::map<uintptr_t, Whole> wholes_;  // by the address of the first weight
  // The whole run holding [first, last) bytes of weights, or nullptr.
  Whole* whole_of(uintptr_t first, uintptr_t last);
  uint64_t generation_ = 1;
  int64_t made_ = 0, reused_ = 0, updated_ = 0;
};

}  // namespace ssm::cuda
