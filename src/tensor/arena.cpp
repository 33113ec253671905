#include "ssm/tensor/arena.h"

#include <algorithm>

namespace ssm {
namespace {

constexpr size_t kMinBlock = size_t{1} << 20;

size_t round_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void* Arena::bump(size_t bytes) {
  bytes = round_up(std::max<size_t>(bytes, 1));
  while (block_ < blocks_.size() && offset_ + bytes > blocks_[block_].size) {
    ++block_;
    offset_ = 0;
  }
  if (block_ == blocks_.size()) {
    // A new block at least as big as everything held so far, so that blocks
    // stay few while a call grows.
    const size_t size = std::max({bytes, kMinBlock, capacity()});
    const DeviceMemory& mem = device_memory(device_);
    void* p = mem.allocate(device_, size);
    if (!p)
      throw Error(cat("out of memory allocating a ", size, "-byte workspace on ", device_str(device_)));
    auto free_fn = mem.free;
    const Device device = device_;
    blocks_.push_back({std::shared_ptr<void>(p, [free_fn, device](void* q) { free_fn(device, q); }), size});
    offset_ = 0;
  }
  void* p = static_cast<char*>(blocks_[block_].bytes.get()) + offset_;
  offset_ += bytes;
  in_use_ += bytes;
  high_water_ = std::max(high_water_, in_use_);
  return p;
}

Tensor Arena::alloc(DType dtype, const Shape& shape) {
  SSM_CHECK(dtype != DType::kQ8, "the arena holds no Q8 tensors");
  SSM_CHECK(depth_ > 0, "arena allocation outside an Arena::Scope");
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* p = bump(bytes);
  return Tensor::borrow(blocks_[block_].bytes, p, dtype, shape, device_);
}

Tensor Arena::zeros(DType dtype, const Shape& shape) {
  Tensor t = alloc(dtype, shape);
  device_memory(device_).fill_zero(device_, t.raw(), t.nbytes());
  return t;
}

size_t Arena::capacity() const {
  size_t n = 0;
  for (const Block& b : blocks_) n += b.size;
  return n;
}

void Arena::release_to(size_t block, size_t offset) {
  block_ = block;
  offset_ = offset;
  if (depth_ > 0) {
    // Bytes in use: whole blocks before `block`, then offset.
    in_use_ = offset;
    for (size_t i = 0; i < block && i < blocks_.size(); ++i) in_use_ += blocks_[i].size;
    return;
  }
  in_use_ = 0;
  if (blocks_.size() > 1) {
    // Merge: one block as large as all of them, which holds whatever
    // sequence of requests they held.
    const size_t size = capacity();
    blocks_.clear();
    const DeviceMemory& mem = device_memory(device_);
    void* p = mem.allocate(device_, size);
    if (!p) return;  // stay empty; the next call allocates as it goes
    auto free_fn = mem.free;
    const Device device = device_;
    blocks_.push_back({std::shared_ptr<void>(p, [free_fn, device](void* q) { free_fn(device, q); }), size});
  }
}

Arena::Scope::Scope(Arena& arena) : arena_(arena), block_(arena.block_), offset_(arena.offset_) {
  ++arena_.depth_;
}

Arena::Scope::~Scope() {
  --arena_.depth_;
  arena_.release_to(block_, offset_);
}

}  // namespace ssm
