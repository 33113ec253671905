// The cuda backend: tensors in the GPU's memory (caching allocator,
// memory.cpp), a stream and cuBLAS handles per Context (runtime.cpp), and
// the kernels of this folder.
#include "ops/backend_registry.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/runtime.h"

namespace ssm {
namespace {

class CudaBackend : public Backend {
 public:
  CudaBackend() {
    cuda::register_memory();
    cuda::add_linear_kernels(table_);
    cuda::add_elementwise_kernels(table_);
    cuda::add_mixer_kernels(table_);
    cuda::add_mamba3_kernels(table_);
    cuda::add_hybrid_kernels(table_);
    cuda::add_train_kernels(table_);
  }
  std::string_view name() const override { return "cuda"; }
  Device device() const override { return Device::cuda(0); }
  const OpTable& ops() const override { return table_; }
  std::unique_ptr<BackendResources> make_resources() const override {
    return std::make_unique<cuda::CudaResources>();
  }

 private:
  OpTable table_;
};

}  // namespace

const Backend* cuda_backend_if_built() {
  static const CudaBackend backend;
  return &backend;
}

}  // namespace ssm
