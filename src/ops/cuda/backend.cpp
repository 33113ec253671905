// The cuda backend: one object per GPU (device 0 is the one `--backend
// cuda` names; ssm serve's replicas use others), tensors in the GPU's memory (caching allocator,
// memory.cpp), a stream and cuBLAS handles per Context (runtime.cpp), and
// the kernels of this folder.
#include <map>
#include <memory>
#include <mutex>

#include "ops/backend_registry.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/runtime.h"

namespace ssm {
namespace {

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int index) : index_(index) {
    cuda::register_memory();
    cuda::add_linear_kernels(table_);
    cuda::add_norm_linear_kernels(table_);
    cuda::add_elementwise_kernels(table_);
    cuda::add_mixer_kernels(table_);
    cuda::add_ssd_step_kernels(table_);
    cuda::add_mamba2_decode_kernels(table_);
    cuda::add_mamba3_kernels(table_);
    cuda::add_hybrid_kernels(table_);
    cuda::add_train_kernels(table_);
    cuda::add_dropout_kernels(table_);
    // ssd_step, ssd_scan (its recurrence and the chunked scan's state pass)
    // and mamba3_scan take a BF16 state at every L (state_memory.h).
    table_.bf16_state_steps = table_.bf16_state_scans = true;
  }
  std::string_view name() const override { return "cuda"; }
  Device device() const override { return Device::cuda(index_); }
  const OpTable& ops() const override { return table_; }
  std::unique_ptr<BackendResources> make_resources() const override {
    return std::make_unique<cuda::CudaResources>(index_);
  }
  // Whole sequences up to 64Ki rows (8 x 8192 steps) in one call, so that a
  // launch covers every chunk of the batch; longer prompts in segments of
  // that many rows bound the workspace (a few GB at 130m shapes).
  int64_t sequence_segment_rows() const override { return int64_t{1} << 16; }

 private:
  int index_;  // the GPU's ordinal: its contexts compute there
  OpTable table_;
};

}  // namespace

const Backend* cuda_backend_if_built() { return cuda_backend_on_device(0); }

const Backend* cuda_backend_on_device(int index) {
  // One backend object per device, made on first use and never destroyed
  // (contexts and tensors may outlive static destructors).
  static std::mutex mutex;
  static auto* backends = new std::map<int, std::unique_ptr<CudaBackend>>;
  const std::lock_guard lock(mutex);
  auto& b = (*backends)[index];
  if (!b) b = std::make_unique<CudaBackend>(index);
  return b.get();
}

}  // namespace ssm
