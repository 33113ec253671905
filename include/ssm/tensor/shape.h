// Shape: the dimensions of a tensor, held inline (at most kMaxDims), so that
// making a view or passing a tensor to an op never touches the heap: a
// decode step must allocate nothing.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>

namespace ssm {

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  template <typename It>
  Shape(It first, It last) {
    assign(first, last);
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](size_t i) { return d_[i]; }
  int64_t operator[](size_t i) const { return d_[i]; }
  // Bounds-checked; negative i counts from the end.
  int64_t at(int64_t i) const;
  int64_t& back() { return d_[n_ - 1]; }
  int64_t back() const { return d_[n_ - 1]; }
  int64_t front() const { return d_[0]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  int64_t* begin() { return d_.data(); }
  int64_t* end() { return d_.data() + n_; }
  const int64_t* data() const { return d_.data(); }

  // ssm::Error past kMaxDims: shapes come from files too.
  void push_back(int64_t d);
  void pop_back() { --n_; }
  void resize(size_t n, int64_t fill = 0);

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  template <typename It>
  void assign(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  std::array<int64_t, kMaxDims> d_{};
  uint8_t n_ = 0;
};

// Element count of a shape; throws ssm::Error on negative dims or overflow.
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);
// "[2, 3]", for messages, logs and GoogleTest.
std::ostream& operator<<(std::ostream& out, const Shape& shape);

}  // namespace ssm
