// copy on every backend against ref over the layouts layers and the model
// pass: the last row of each sequence, one sequence's rows of a state, a KV
// cache grown into a larger buffer, time segments cut out of and pasted into
// (B, L, D), column blocks, size-1 dimensions with odd strides, integer
// tensors, vectors. A copy is exact: results must be equal to the bit, and
// nothing outside the destination view may change. ref itself is checked
// against the tensor layer's own strided clone().
#include <gtest/gtest.h>

#include <functional>

#include "op_test_support.h"
#include "ssm/ops/elementwise.h"

namespace ssm {
namespace {

constexpr double kUntouched = -7;  // no random value equals it

struct Layout {
  const char* name;
  Shape dst_shape, src_shape;                     // the whole tensors
  std::function<Tensor(const Tensor&)> dst, src;  // the views copied
  DType dtype = DType::kF32;
};

Tensor whole(const Tensor& t) { return t; }

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"last_row_of_each_sequence",
       {3, 1, 10},
       {3, 7, 13},
       whole,
       [](const Tensor& s) { return s.cols(1, 11).slice(1, 6, 7); }},
      {"one_sequence_of_a_state",
       {4, 3, 5, 6},
       {2, 3, 5, 6},
       [](const Tensor& d) { return d.slice(0, 2, 3); },
       [](const Tensor& s) { return s.slice(0, 1, 2); }},
      {"kv_cache_growth",
       {2, 3, 20, 8},
       {2, 3, 9, 8},
       [](const Tensor& d) { return d.slice(2, 0, 9); },
       whole},
      {"kv_cache_growth_large",
       {4, 8, 300, 64},
       {4, 8, 256, 64},
       [](const Tensor& d) { return d.slice(2, 0, 256); },
       whole},
      {"cut_time_segment",
       {2, 4, 12},
       {2, 11, 12},
       whole,
       [](const Tensor& s) { return s.slice(1, 3, 7); }},
      {"paste_time_segment",
       {2, 11, 12},
       {2, 4, 12},
       [](const Tensor& d) { return d.slice(1, 5, 9); },
       whole},
      {"paste_column_block_segment",
       {2, 11, 12},
       {2, 4, 20},
       [](const Tensor& d) { return d.slice(1, 2, 6); },
       [](const Tensor& s) { return s.cols(3, 15); }},
      {"large_segment",
       {2, 300, 96},
       {2, 500, 96},
       whole,
       [](const Tensor& s) { return s.slice(1, 100, 400); }},
      {"size_one_dimensions",
       {1, 5, 1, 7},
       {2, 5, 3, 7},
       whole,
       [](const Tensor& s) { return s.slice(0, 1, 2).slice(2, 1, 2); }},
      {"single_column", {6, 1}, {6, 4}, whole, [](const Tensor& s) { return s.cols(2, 3); }},
      {"vector", {100}, {300}, whole, [](const Tensor& s) { return s.slice(0, 50, 150); }},
      {"i64_columns",
       {3, 9},
       {3, 20},
       whole,
       [](const Tensor& s) { return s.cols(4, 13); },
       DType::kI64},
  };
  return all;
}

// Random values in [-1, 1] (I64: [0, 1000)), or all kUntouched.
Tensor make(const Shape& shape, DType dtype, uint64_t seed, bool untouched) {
  const Tensor f =
      untouched ? Tensor::zeros(DType::kF32, shape) : testing::random_tensor(shape, seed);
  Tensor t = Tensor::empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = untouched ? kUntouched : f.data<float>()[i];
    if (dtype == DType::kI64)
      t.data<int64_t>()[i] = static_cast<int64_t>(untouched ? v : 500 * (v + 1));
    else
      t.data<float>()[i] = static_cast<float>(v);
  }
  return t;
}

// The whole destination after copying the source view into its view on ctx.
Tensor run(Context& ctx, const Layout& l, const Tensor& dst, const Tensor& src) {
  const Tensor d = testing::on(ctx, dst), s = testing::on(ctx, src);
  ops::copy(ctx, l.dst(d), l.src(s));
  return testing::host(d);
}

class Copy : public ::testing::TestWithParam<std::string> {};

TEST_P(Copy, EqualsRefToTheBitOnEveryLayout) {
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.name);
    const Tensor dst = make(l.dst_shape, l.dtype, 1, false),
                 src = make(l.src_shape, l.dtype, 2, false);
    Context ref("ref", 1);
    const Tensor want = run(ref, l, dst, src);
    for (int threads : {1, 2}) {
      Context ctx(GetParam(), threads);
      EXPECT_TRUE(testing::identical(run(ctx, l, dst, src), want)) << threads << " threads";
    }
  }
}

TEST(CopyRef, WritesTheViewAndNothingElse) {
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.name);
    const Tensor dst = make(l.dst_shape, l.dtype, 1, true),
                 src = make(l.src_shape, l.dtype, 2, false);
    Context ref("ref", 1);
    const Tensor got = run(ref, l, dst, src);
    EXPECT_TRUE(testing::identical(l.dst(got).clone(), l.src(src).clone()));
    const Tensor as_f64 = got.to_dtype(DType::kF64);
    int64_t written = 0;
    for (int64_t i = 0; i < as_f64.numel(); ++i) written += as_f64.data<double>()[i] != kUntouched;
    EXPECT_EQ(written, l.dst(got).numel());
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Copy, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm
