// A named parameter of a layer: checkpoint-relative name, expected shape and
// its F32 value. Layers own a list of these; the model's one table of
// parameter names is the concatenation of its layers' lists.
#pragma once

#include <string>

#include "ssm/tensor/tensor.h"

namespace ssm {

enum class ParamRole {
  kWeight,   // matrices and embeddings: weight decay applies
  kNoDecay,  // norms, biases, dt_bias, A_log, D and similar vectors
};

struct Param {
  std::string name;
  Shape shape;
  ParamRole role = ParamRole::kWeight;
  Tensor value;  // F32 of `shape` once loaded or initialised
};

// The part of a parameter that trains: rows [row_begin, row_end) of its
// first dimension (all rows unless WSLA restricts them).
struct TrainableSlice {
  Param* param = nullptr;
  int64_t row_begin = 0;
  int64_t row_end = 0;
};

}  // namespace ssm
