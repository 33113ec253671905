// A backend whose tensors live in host memory and that keeps nothing per
// context: ref and cpu are both this, with their own kernels.
#pragma once

#include "ssm/ops/backend.h"
#include "ssm/ops/op_table.h"

namespace ssm {

class HostBackend : public Backend {
 public:
  HostBackend(std::string_view name, void (*fill)(OpTable&)) : name_(name) { fill(table_); }
  std::string_view name() const override { return name_; }
  Device device() const override { return Device::host(); }
  const OpTable& ops() const override { return table_; }

 private:
  std::string_view name_;
  OpTable table_;
};

}  // namespace ssm
