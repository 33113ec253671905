// Helpers for op tests that compare a backend with ref: run the same op on
// both from the same host inputs, compare every output, and check that the
// backend's results do not change with its thread count where its kernels
// promise that. Also: inputs laid out as layers pass them (column blocks of
// wider rows).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "support/backends.h"
#include "support/random.h"

namespace ssm::testing {

// The outputs of one run, copied to the host, each with a name for messages.
using Outputs = std::vector<std::pair<std::string, Tensor>>;
// Makes its device tensors from host inputs with on(ctx, ...), so that every
// run starts from the same values; returns host(...) of the outputs.
using OpRun = std::function<Outputs(Context& ctx)>;

// The named tensors that are defined (wanted outputs), copied to the host.
inline Outputs outputs(std::initializer_list<std::pair<const char*, Tensor>> named) {
  Outputs out;
  for (const auto& [name, t] : named)
    if (t.defined()) out.emplace_back(name, host(t));
  return out;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.clone(), y = b.clone();
  return x.same_layout(y) && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

struct RefCheck {
  Tolerance tol = {};
  std::vector<int> threads = {1, 2};
  // The backend's outputs are bitwise equal for every thread count.
  bool thread_invariant = true;
};

// Runs `run` on ref, then on `backend` with each thread count, and expects
// every output close to ref's. With SSM_PRINT_ERRORS set, prints each
// output's error relative to ref's largest value.
inline void expect_matches_ref(const std::string& backend, const OpRun& run,
                               const RefCheck& check = {}) {
  Context ref_ctx("ref", 1);
  const Outputs want = run(ref_ctx);
  Outputs first;
  for (int threads : check.threads) {
    Context ctx(backend, threads);
    const Outputs got = run(ctx);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(close(got[i].second, want[i].second, check.tol))
          << got[i].first << ", " << threads << " threads";
      if (std::getenv("SSM_PRINT_ERRORS")) {
        const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
        std::cout << "[error] " << test->test_suite_name() << "." << test->name() << " "
                  << got[i].first << " " << max_rel_error(got[i].second, want[i].second) << "\n";
      }
      if (check.thread_invariant && !first.empty()) {
        EXPECT_TRUE(bitwise_equal(got[i].second, first[i].second))
            << got[i].first << " differs between " << check.threads.front() << " and " << threads
            << " threads";
      }
    }
    if (first.empty()) first = got;
  }
}

// An output written through `view`, a column block of wider rows (or the
// whole of a dense tensor); `rows` is all of those rows, whose padding the
// op must leave as it was. Comparing `rows` with ref's checks both.
struct BlockOutput {
  Tensor view, rows;
};

// `t` (host, dense) as a column block of wider rows on ctx's device: `left`
// columns before it, `right` after, holding noise (the same in every run).
inline BlockOutput in_block(Context& ctx, const Tensor& t, int64_t left, int64_t right) {
  Shape wide_shape = t.shape();
  const int64_t C = t.cols(), W = C + left + right;
  wide_shape.back() = W;
  Tensor wide = random_tensor(wide_shape, 999).to_dtype(t.dtype());
  const size_t esize = dtype_size(t.dtype());
  for (int64_t r = 0; r < t.rows(); ++r)
    std::memcpy(static_cast<char*>(wide.raw()) + (r * W + left) * esize,
                static_cast<const char*>(t.raw()) + r * C * esize, C * esize);
  const Tensor rows = on(ctx, wide);
  return {rows.cols(left, left + C), rows};
}
// in_block when `wider`, else a dense copy on ctx's device.
inline BlockOutput in_block(Context& ctx, const Tensor& t, bool wider, int64_t left,
                            int64_t right) {
  if (wider) return in_block(ctx, t, left, right);
  const Tensor d = on(ctx, t);
  return {d, d};
}

// The view of in_block, for inputs.
inline Tensor in_wider_rows(Context& ctx, const Tensor& t, int64_t left, int64_t right) {
  return in_block(ctx, t, left, right).view;
}
inline Tensor on_rows(Context& ctx, const Tensor& t, bool wider, int64_t left, int64_t right) {
  return in_block(ctx, t, wider, left, right).view;
}

}  // namespace ssm::testing
