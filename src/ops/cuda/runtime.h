// The host side of the cuda backend: error checks for the CUDA runtime and
// cuBLAS, and the resources each Context of the backend holds (its stream
// and library handles). Every kernel of a context runs on its stream, in
// order; copies to and from the host go through the legacy default stream,
// which waits for the context streams (they are created blocking), so a
// tensor read back after an op sees the op's result.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <unordered_map>

#include "ops/cuda/weight_copies.h"
#include "ssm/ops/context.h"

namespace ssm::cuda {

struct StepRecording;  // step_record.h

// ssm::Error naming what failed and CUDA's message, unless status is success.
void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);

// When norm_linear normalises inside the few-row projection (fused_decode):
// never; at block level where the projection runs in one wave; at block
// level always; at warp level where that fits (else as kOneWave), a warp a
// column or (kSplit) a column's K over several warps.
enum class FusedDecode { kNever, kOneWave, kAlways, kWarp, kSplit };

// A context's stream and handles live on one device. Kernels launch on the
// calling thread's current device, so resources(ctx) makes the context's
// device current first: a context may be made on one thread and computed
// with on another (ssm serve's schedulers), and several contexts on
// different devices may compute at once, each on its own thread.
class CudaResources : public BackendResources {
 public:
  // ssm::Error when there is no GPU, or no GPU of that ordinal.
  explicit CudaResources(int device = 0);
  ~CudaResources() override;
  CudaResources(const CudaResources&) = delete;
  CudaResources& operator=(const CudaResources&) = delete;

  // CUDA graphs of the stream's work (BackendResources' replay interface).
  bool replay(uint64_t key) override;
  bool should_record(uint64_t key) override;
  void begin_record() override;
  void end_record(uint64_t key) override;
  void abandon_record() override;
  bool set_bf16_compute(bool on) override {
    bf16_compute = on;
    return true;
  }
  void keep_weight_copies(const void* begin, size_t bytes) override {
    if (keep_weight_copies_) weight_copies.keep(begin, bytes);
  }
  void weights_changed() override { weight_copies.changed(); }
  void forget_weights() override { weight_copies.forget(); }
  void* bf16_copy_for_update(const float* weights, int64_t n) override {
    return bf16_compute ? weight_copies.for_update(weights, n, device) : nullptr;
  }
  // Through pinned staging slots, each reused once its last copy ran.
  bool copy_from_host_queued(void* dst, const void* src, size_t bytes) override;
  // A recorded training step (step_record.cpp): a CUDA graph whose host
  // inputs are copied from device buffers that each replay refills first.
  bool copy_step_input_queued(void* dst, const void* src, size_t bytes,
                              const StepInputFill& refill) override;
  bool begin_step_record(uint64_t key) override;
  bool end_step_record(uint64_t key, const StepInputs& inputs) override;
  bool replay_step(uint64_t key, const StepInputs& inputs) override;
  void drop_step_record(uint64_t key) override;

  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t blas_lt = nullptr;
  // BF16/F16 projections round the activations to the weights' type (one
  // GEMM, as the reference's kernels do) instead of splitting them into
  // exact pieces: set by SSM_CUDA_ROUND_ACTIVATIONS=1 (cuda_bench does).
  bool round_activations = false;
  bool bf16_compute = false;  // F32 products on bf16 tensor cores (gemm_f32.h)
  // Under bf16_compute, the weights' bf16 copies kept for a training step
  // (weight_copies.h): off with SSM_CUDA_WEIGHT_COPIES=0 (every use rounds
  // its weights again, as before; the same bf16 values either way).
  WeightCopies weight_copies;
  // Either of the two: the scans' products may round too (chunk_scan.cu).
  bool rounds_products() const { return round_activations || bf16_compute; }
  // launch_ssd_step.h's kStepCounters counters, zero between kernels (each
  // kernel that counts on them leaves them at zero): fixed, so that a
  // recorded step allocates nothing.
  unsigned* step_counters = nullptr;
  // Decode-step kernels (the few-row projections, ssd_step) launched with
  // programmatic dependent launch (overlap_launch.h), so that each starts
  // while the one before finishes: off with SSM_CUDA_OVERLAP=0.
  bool overlap_launches = true;
  // mamba3_prepare_scan's decode step as one kernel (mamba3_step.cu) where
  // it fits; off with SSM_CUDA_M3_STEP=0 (the prepare op's three kernels,
  // then the scan's two), for measuring one against the other.
  bool fused_mamba3_step = true;
  // The few-row projections' one-wave kernel (linear_skinny.cu: the whole
  // grid resident, every weight load issued before the wait) where W fits
  // in its registers: on with SSM_CUDA_ONE_WAVE=1. Off by default: on an
  // H100 it made a 130m Mamba-2's decode slower (1,616 against 1,922
  // tokens/s at batch 1, 6,453 against 7,066 at batch 8; docs/CUDA.md).
  bool one_wave_projections = false;
  // One row against many columns (the decode step's head at batch 1) by a
  // grid of warps streaming columns (linear_skinny.cu's
  // stream_columns_kernel); SSM_CUDA_STREAM_COLUMNS=0 the multi-wave kernel.
  bool stream_columns = true;
  // The decode step's fused kernels: norm_linear's few-row kernels normalise
  // inside the projection (else the norm, then linear). By default at warp
  // level where it fits (one row, one norm group; a column's K split over
  // several warps, as one row's plain projections of few columns are;
  // =warp a warp a column for both), else at block level where the
  // projection runs in one wave; SSM_CUDA_FUSED_DECODE=0 never,
  // =one_wave the block level where in one wave only (the default before),
  // =1 the block level also in the multi-wave kernel, where on an H100 it
  // made the step slower (docs/CUDA.md: Mamba-2 1,220 against 1,832
  // tokens/s at batch 1).
  FusedDecode fused_decode = FusedDecode::kSplit;
  // mamba2_decode_stack's kernel (mamba2_decode_stack.cu) for a decode step
  // through Mamba-2 layers: 0 off (the layers' own kernels), 1 one
  // cooperative launch a step, 2 a launch per phase (a check of the first):
  // SSM_CUDA_PERSISTENT_DECODE=1 or 2. Off by default until measured.
  int persistent_decode = 0;
  // The chunked scan's heads an output block (chunk_scan.cu), forced for
  // measuring: SSM_CUDA_SCAN_HEADS=1, 2, 4 or 8 (0: chosen by the launch).
  int scan_heads = 0;
  // The SSD scan backward's chunk_backward with FP16 operands
  // (ssd_scan_backward_f16.cu) in the rounding mode, where its tiles fit: on
  // by default (an H100, 2026-12-07: the same errors against ref as the
  // TF32 kernel, 1-2.6% off a 130m training step), off with
  // SSM_CUDA_SSD_BACKWARD_F16=0.
  bool ssd_backward_f16 = true;
  // ssd_step's many-sequence path as two launches, the convolution step
  // then a state step that only streams (ssd_step_wide.cu), and Mamba-3's
  // SISO decode step likewise (mamba3_scan_step.cu); off with
  // SSM_CUDA_STATE_STREAM=0 (the wide blocks of ssd_step_kernel and
  // scan_kernel, for an A/B).
  bool stream_state_step = true;
  // Its grid barrier's two counters (zero when made), after the step counters.
  unsigned* grid_barrier = nullptr;

 private:
  void* blas_workspace_ = nullptr;  // fixed, so that recorded GEMMs allocate nothing
  // SSM_CUDA_GRAPHS=0 records no graph: while a stream of a device is being
  // captured, no thread may use that device's legacy default stream (which
  // every host copy goes through), and ssm serve copies session states on
  // its request threads while the replica's thread decodes.
  bool record_graphs_ = true;
  bool keep_weight_copies_ = true;  // SSM_CUDA_WEIGHT_COPIES=0: off
  // copy_from_host_queued's pinned slots and the events of their last copies.
  // A training step queues three copies a micro-batch (ids, the head loss's
  // targets, the embedding backward's rows by id) and AdamW's scalars: 8
  // slots let the host queue the next step while the device runs the last.
  static constexpr int kStagingSlots = 8;
  void* staging_[kStagingSlots] = {};
  cudaEvent_t staged_[kStagingSlots] = {};
  size_t staging_bytes_ = 0;
  int next_slot_ = 0;
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
  std::unordered_map<uint64_t, int> seen_;
  // The recorded training steps by key, and the one being recorded.
  std::unordered_map<uint64_t, std::unique_ptr<StepRecording>> steps_;
  std::unique_ptr<StepRecording> recording_;
  uint64_t recording_key_ = 0;
};

CudaResources& resources(Context& ctx);
inline cudaStream_t stream(Context& ctx) { return resources(ctx).stream; }

// Makes `device` the calling thread's current device (CUDA keeps one per
// host thread) and puts the previous one back when it goes: the memory
// functions, called from any thread, work on the device a tensor lives on.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// After a launch: ssm::Error naming the kernel when the launch failed.
void check_launch(const char* kernel);

// Installs the device memory functions (caching allocator) for DeviceType::kCuda.
void register_memory();

}  // namespace ssm::cuda
