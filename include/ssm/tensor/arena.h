// Workspace arena: intermediates of a call are bumped out of a few large
// blocks and given back all at once when the scope that made them ends. After
// the first call of a given size nothing is allocated, so a decode step that
// takes its workspace here allocates nothing; every layer of a model shares
// the same bytes, one after another.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ssm/tensor/tensor.h"

namespace ssm {

class Arena {
 public:
  explicit Arena(Device device = Device::host()) : device_(device) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Device device() const { return device_; }

  // A dense, uninitialised tensor valid until the innermost open Scope ends
  // (its bytes stay alive while the tensor does, but are reused after that).
  Tensor alloc(DType dtype, const Shape& shape);
  Tensor zeros(DType dtype, const Shape& shape);

  // Restores the arena to where it was when the scope opened. When the
  // outermost scope closes after a call outgrew the first block, the blocks
  // are merged into one big enough for that call, so the next fits.
  class Scope {
   public:
    explicit Scope(Arena& arena);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Arena& arena_;
    size_t block_, offset_;
  };

  bool in_scope() const { return depth_ > 0; }  // alloc() may be called
  size_t capacity() const;    // bytes held
  size_t high_water() const { return high_water_; }  // most bytes in use at once

 private:
  struct Block {
    std::shared_ptr<void> bytes;
    size_t size = 0;
  };
  void* bump(size_t bytes);
  void release_to(size_t block, size_t offset);

  Device device_;
  std::vector<Block> blocks_;
  size_t block_ = 0, offset_ = 0;  // the next free byte
  size_t in_use_ = 0, high_water_ = 0;
  int depth_ = 0;
};

}  // namespace ssm
