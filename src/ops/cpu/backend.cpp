#include "ops/backend_registry.h"
#include "ops/host_backend.h"
#include "ops/cpu/kernels.h"

namespace ssm {
namespace {

void fill(OpTable& t) {
  cpu::add_linear_kernels(t);
  cpu::add_conv1d_kernels(t);
  cpu::add_norm_kernels(t);
  cpu::add_ssd_kernels(t);
  cpu::add_selective_scan_kernels(t);
  cpu::add_mamba3_kernels(t);
  cpu::add_attention_kernels(t);
  cpu::add_embedding_kernels(t);
  cpu::add_elementwise_kernels(t);
  cpu::add_activation_kernels(t);
  cpu::add_moe_kernels(t);
  cpu::add_loss_kernels(t);
  cpu::add_optimizer_kernels(t);
  cpu::add_dropout_kernels(t);
}

}  // namespace

const Backend& cpu_backend() {
  static const HostBackend backend("cpu", &fill);
  return backend;
}

}  // namespace ssm
