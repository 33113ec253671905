// The workspace arena: scopes give bytes back, nested scopes nest, and once a
// call of a given size has run, the same call allocates nothing.
#include "ssm/tensor/arena.h"

#include <gtest/gtest.h>

namespace ssm {
namespace {

TEST(Arena, ScopesGiveTheirBytesBackInOrder) {
  Arena arena;
  void* first = nullptr;
  {
    Arena::Scope s(arena);
    first = arena.alloc(DType::kF32, {100}).raw();
    {
      Arena::Scope inner(arena);
      const Tensor t = arena.alloc(DType::kF32, {10});
      EXPECT_NE(t.raw(), first);
    }
    // The inner scope's bytes come back to the next request.
    const Tensor again = arena.alloc(DType::kF32, {10});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(again.raw()) % kAlignment, 0u);
  }
  Arena::Scope s(arena);
  EXPECT_EQ(arena.alloc(DType::kF32, {100}).raw(), first);
}

TEST(Arena, AfterACallOutgrowsItTheNextFitsInOneBlock) {
  Arena arena;
  auto call = [&] {
    Arena::Scope s(arena);
    std::vector<void*> ptrs;
    for (int i = 0; i < 6; ++i) ptrs.push_back(arena.alloc(DType::kF32, {300000}).raw());
    return ptrs;
  };
  call();  // grows: several blocks, merged at the end
  const size_t held = arena.capacity();
  const auto second = call();
  EXPECT_EQ(arena.capacity(), held);
  EXPECT_EQ(call(), second);  // the same bytes every time: nothing allocated
}

TEST(Arena, AllocationOutsideAScopeIsRefused) {
  Arena arena;
  EXPECT_THROW(arena.alloc(DType::kF32, {4}), std::exception);
}

TEST(Arena, ZerosAreZero) {
  Arena arena;
  Arena::Scope s(arena);
  Tensor t = arena.alloc(DType::kF32, {64});
  for (int i = 0; i < 64; ++i) t.data<float>()[i] = 1.f;
  {
    Arena::Scope inner(arena);
    (void)inner;
  }
  Arena::Scope s2(arena);
  const Tensor z = arena.zeros(DType::kF32, {64});
  for (int i = 0; i < 64; ++i) EXPECT_EQ(z.data<float>()[i], 0.f);
}

}  // namespace
}  // namespace ssm
