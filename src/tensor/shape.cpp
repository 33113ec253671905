#include "ssm/tensor/shape.h"

#include <limits>
#include <ostream>

#include "ssm/core/error.h"

namespace ssm {

int64_t Shape::at(int64_t i) const {
  const int64_t n = static_cast<int64_t>(n_);
  const int64_t j = i < 0 ? i + n : i;
  SSM_CHECK(0 <= j && j < n, "dimension ", i, " of a ", n, "-dimensional shape");
  return d_[static_cast<size_t>(j)];
}

void Shape::push_back(int64_t d) {
  if (n_ == kMaxDims) throw Error(cat("a shape has at most ", kMaxDims, " dimensions"));
  d_[n_++] = d;
}

void Shape::resize(size_t n, int64_t fill) {
  if (n > kMaxDims) throw Error(cat("a shape has at most ", kMaxDims, " dimensions"));
  for (size_t i = n_; i < n; ++i) d_[i] = fill;
  n_ = static_cast<uint8_t>(n);
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(cat("negative dimension in shape ", shape_str(shape)));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw Error(cat("shape ", shape_str(shape), " has too many elements"));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape_str(shape); }

}  // namespace ssm
