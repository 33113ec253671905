// Nothing allocates per token: this test program's operator new counts every
// heap allocation (on any thread), and decoding steps after warm-up must not
// add to the count. A generation's count must not grow with its length.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "decode_support.h"
#include "ssm/model/generator.h"

// Under AddressSanitizer the counting operators stay out: ASan's own new and
// delete check every other test of this program for mismatched pairs, and
// the Release build of the suite runs these tests.
#if defined(__SANITIZE_ADDRESS__)
#define SSM_COUNT_ALLOCATIONS 0
#else
#define SSM_COUNT_ALLOCATIONS 1
#endif

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

#if SSM_COUNT_ALLOCATIONS

// Every unaligned form is replaced, so that each allocation is counted and
// freed by its own pair (the runtime's, ASan's included, never mixes with
// ours). Out of line, so that the compiler never sees free() meet a pointer
// from operator new (which it would flag as mismatched after inlining).
namespace {
__attribute__((noinline)) void* counted_alloc(std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
}  // namespace

__attribute__((noinline)) void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new[](std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
__attribute__((noinline)) void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif

namespace ssm {
namespace {

class DecodeAlloc : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeAlloc, ModelStepAllocatesNothingAfterWarmUp) {
  if (!SSM_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are not counted under AddressSanitizer";
  SSM_LOAD_GOLDEN_OR_SKIP(model, GetParam());
  // F32, then the projections converted to BF16 (--dtype). Not yet int8: a
  // step slices the Q8 head's rows, and slicing allocates the scales' view.
  // And with the SSM state stored in BF16 (set_state_dtype), F32 weights.
  for (const auto& [weights, state_dtype] : {std::pair{DType::kF32, DType::kF32},
                                            std::pair{DType::kF32, DType::kBF16},
                                            std::pair{DType::kBF16, DType::kF32}}) {
  model.convert_projections(weights);
  model.set_state_dtype(state_dtype);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(cat(dtype_name(weights), " weights, state ", dtype_name(state_dtype)));
    Context ctx(threads);
    ModelState state = model.make_state(3);
    reserve_state(state, 64, ctx);
    std::vector<int64_t> tok = {1, 2, 3};
    model.step(tok.data(), state, ctx);  // buffers grow here
    const int64_t before = g_allocations.load();
    for (int i = 0; i < 20; ++i) {
      const Tensor& logits = model.step(tok.data(), state, ctx);
      for (int64_t b = 0; b < 3; ++b) tok[b] = (tok[b] * 31 + i + static_cast<int64_t>(logits.data<float>()[b] > 0)) % 256;
    }
    EXPECT_EQ(g_allocations.load() - before, 0) << threads << " threads";
  }
  }
}

TEST_P(DecodeAlloc, GenerationAllocationsDoNotGrowWithLength) {
  if (!SSM_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are not counted under AddressSanitizer";
  SSM_LOAD_GOLDEN_OR_SKIP(model, GetParam());
  Context ctx(2);
  std::vector<std::string> bytes(256);
  for (int i = 0; i < 256; ++i) bytes[i] = std::string(1, static_cast<char>(i));
  Generator gen(model, ctx);
  gen.set_token_text([&](int64_t id) { return std::string_view(bytes[id]); });
  auto count = [&](int64_t n) {
    GenerationConfig cfg{.max_new_tokens = n};
    cfg.sampling = SamplingParams{.temperature = 1.f, .top_k = 20, .top_p = 0.9f, .repeat_penalty = 1.2f};
    cfg.stop_strings = {"\xff\xfe\xfd never"};
    int64_t seen = 0;
    SessionState s = make_session(model, 2);
    const int64_t before = g_allocations.load();
    gen.generate(s, {{5, 6, 7}, {8, 9, 10}}, cfg, [&](int64_t, int64_t) { ++seen; });
    const int64_t used = g_allocations.load() - before;
    EXPECT_EQ(seen, 2 * n);
    return used;
  };
  count(80);  // warm-up: workspaces (attention scores too) grow to the longest run
  // Both runs reserve their KV caches up front (a fresh session's cache
  // holds 16 tokens), so any difference would come from the token loop.
  EXPECT_EQ(count(20), count(80));
}

INSTANTIATE_TEST_SUITE_P(Cases, DecodeAlloc, ::testing::ValuesIn(testing::golden_model_cases()),
                         testing::golden_case_name);

}  // namespace
}  // namespace ssm
