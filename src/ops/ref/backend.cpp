#include "ops/backend_registry.h"
#include "ops/host_backend.h"
#include "ops/ref/kernels.h"

namespace ssm {
namespace {

void fill(OpTable& t) {
  ref::add_linear_kernels(t);
  ref::add_conv1d_kernels(t);
  ref::add_norm_kernels(t);
  ref::add_ssd_kernels(t);
  ref::add_selective_scan_kernels(t);
  ref::add_mamba3_kernels(t);
  ref::add_attention_kernels(t);
  ref::add_embedding_kernels(t);
  ref::add_elementwise_kernels(t);
  ref::add_activation_kernels(t);
  ref::add_moe_kernels(t);
  ref::add_loss_kernels(t);
  ref::add_optimizer_kernels(t);
  ref::add_dropout_kernels(t);
}

}  // namespace

const Backend& ref_backend() {
  static const HostBackend backend("ref", &fill);
  return backend;
}

}  // namespace ssm
