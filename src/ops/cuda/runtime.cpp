#include "ops/cuda/runtime.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "ops/cuda/launch_ssd_step.h"
#include "ops/cuda/step_record.h"
#include "ssm/core/error.h"
#include "ssm/ops/backend.h"

namespace ssm::cuda {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(cat("cuda: ", what, " failed: ", cudaGetErrorName(status), " (",
                    cudaGetErrorString(status), ")"));
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(cat("cuda: ", what, " failed: ", cublasGetStatusName(status), " (",
                    cublasGetStatusString(status), ")"));
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  if (current == device) return;
  check(cudaSetDevice(device), "cudaSetDevice");
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

CudaResources::CudaResources(int device_index) : device(device_index) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the sticky error of a machine without a GPU
    throw Error("cuda: no CUDA device is available (backend 'cuda' needs an NVIDIA GPU)");
  }
  if (device < 0 || device >= devices)
    throw Error(cat("cuda: there is no device ", device, ": this machine has ", devices, " (0 to ",
                    devices - 1, ")"));
  // The stream and the library handles belong to the device current when
  // they are made; the constructing thread keeps it current afterwards.
  check(cudaSetDevice(device), "cudaSetDevice");
  const char* round = std::getenv("SSM_CUDA_ROUND_ACTIVATIONS");
  round_activations = round && std::string_view(round) == "1";
  const char* graphs = std::getenv("SSM_CUDA_GRAPHS");
  record_graphs_ = !(graphs && std::string_view(graphs) == "0");
  const char* copies = std::getenv("SSM_CUDA_WEIGHT_COPIES");
  keep_weight_copies_ = !(copies && std::string_view(copies) == "0");
  const char* overlap = std::getenv("SSM_CUDA_OVERLAP");
  overlap_launches = !(overlap && std::string_view(overlap) == "0");
  const char* m3_step = std::getenv("SSM_CUDA_M3_STEP");
  fused_mamba3_step = !(m3_step && std::string_view(m3_step) == "0");
  const char* one_wave = std::getenv("SSM_CUDA_ONE_WAVE");
  one_wave_projections = one_wave && std::string_view(one_wave) == "1";
  const char* columns = std::getenv("SSM_CUDA_STREAM_COLUMNS");
  stream_columns = !(columns && std::string_view(columns) == "0");
  if (const char* fused = std::getenv("SSM_CUDA_FUSED_DECODE")) {
    const std::string_view v(fused);
    fused_decode = v == "0"          ? FusedDecode::kNever
                   : v == "1"        ? FusedDecode::kAlways
                   : v == "one_wave" ? FusedDecode::kOneWave
                   : v == "warp"     ? FusedDecode::kWarp
                                     : FusedDecode::kSplit;
  }
  if (const char* persistent = std::getenv("SSM_CUDA_PERSISTENT_DECODE")) {
    const std::string_view v(persistent);
    persistent_decode = v == "1" ? 1 : v == "2" ? 2 : 0;
  }
  if (const char* heads = std::getenv("SSM_CUDA_SCAN_HEADS")) {
    const std::string_view v(heads);
    scan_heads = v == "1" || v == "2" || v == "4" || v == "8" ? v[0] - '0' : 0;
  }
  const char* f16 = std::getenv("SSM_CUDA_SSD_BACKWARD_F16");
  ssd_backward_f16 = !(f16 && std::string_view(f16) == "0");
  const char* stream_state = std::getenv("SSM_CUDA_STATE_STREAM");
  stream_state_step = !(stream_state && std::string_view(stream_state) == "0");
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  check(cublasCreate(&blas), "cublasCreate");
  check(cublasSetStream(blas, stream), "cublasSetStream");
  // F32 weights compute in full F32 (the op tests hold them to 1e-5 of ref);
  // BF16/F16 weights use the tensor cores with F32 accumulation.
  check(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check(cublasLtCreate(&blas_lt), "cublasLtCreate");
  constexpr size_t kWorkspace = size_t{32} << 20;
  check(cudaMalloc(&blas_workspace_, kWorkspace), "cudaMalloc (cuBLAS workspace)");
  check(cublasSetWorkspace(blas, blas_workspace_, kWorkspace), "cublasSetWorkspace");
  const size_t counter_bytes = sizeof(unsigned) * (kStepCounters + 2);
  void* counters = nullptr;
  check(cudaMalloc(&counters, counter_bytes), "cudaMalloc (step counters)");
  step_counters = static_cast<unsigned*>(counters);
  check(cudaMemset(step_counters, 0, counter_bytes), "cudaMemset (step counters)");
  grid_barrier = step_counters + kStepCounters;
}

bool CudaResources::copy_from_host_queued(void* dst, const void* src, size_t bytes) {
  // Recording a training step: a copy no replay can redo fails the recording.
  if (recording_) return copy_step_input_queued(dst, src, bytes, {});
  const DeviceGuard on(device);
  if (bytes > staging_bytes_) {
    // Grown once (the ids of the largest batch so far): the slots' last
    // copies have run before their memory goes.
    for (int i = 0; i < kStagingSlots; ++i) {
      if (staged_[i]) check(cudaEventSynchronize(staged_[i]), "cudaEventSynchronize (staging)");
      if (staging_[i]) check(cudaFreeHost(staging_[i]), "cudaFreeHost (staging)");
      staging_[i] = nullptr;
      check(cudaMallocHost(&staging_[i], bytes), "cudaMallocHost (staging)");
      if (!staged_[i])
        check(cudaEventCreateWithFlags(&staged_[i], cudaEventDisableTiming), "cudaEventCreate (staging)");
    }
    staging_bytes_ = bytes;
  }
  const int slot = next_slot_;
  next_slot_ = (next_slot_ + 1) % kStagingSlots;
  // The slot's previous copy has read it (kStagingSlots copies ago: the
  // host runs at most that many steps ahead of the device).
  check(cudaEventSynchronize(staged_[slot]), "cudaEventSynchronize (staging)");
  std::memcpy(staging_[slot], src, bytes);
  check(cudaMemcpyAsync(dst, staging_[slot], bytes, cudaMemcpyHostToDevice, stream), "queued copy from the host");
  check(cudaEventRecord(staged_[slot], stream), "cudaEventRecord (staging)");
  return true;
}

bool CudaResources::replay(uint64_t key) {
  const auto it = graphs_.find(key);
  if (it == graphs_.end()) return false;
  check(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
  return true;
}

bool CudaResources::should_record(uint64_t key) {
  if (!record_graphs_) return false;
  // Bounded: a caller that never repeats its buffers records nothing.
  if (graphs_.size() >= 64) return false;
  return ++seen_[key] >= 2;
}

void CudaResources::begin_record() {
  // Relaxed: the caching allocator may run on this thread meanwhile (it
  // does not while a warmed-up step records, but must not be refused).
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
}

void CudaResources::end_record(uint64_t key) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(status, "cudaGraphInstantiate");
  graphs_[key] = exec;
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
}

void CudaResources::abandon_record() {
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

CudaResources::~CudaResources() {
  const DeviceGuard on(device);
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  if (recording_) drop_step_record(recording_key_);
  steps_.clear();
  if (blas_lt) cublasLtDestroy(blas_lt);
  if (blas) cublasDestroy(blas);
  if (stream) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  if (blas_workspace_) cudaFree(blas_workspace_);
  if (step_counters) cudaFree(step_counters);
  for (int i = 0; i < kStagingSlots; ++i) {
    if (staging_[i]) cudaFreeHost(staging_[i]);
    if (staged_[i]) cudaEventDestroy(staged_[i]);
  }
}

CudaResources& resources(Context& ctx) {
  auto* r = dynamic_cast<CudaResources*>(ctx.resources());
  SSM_CHECK(r, "context of backend '", ctx.backend().name(), "' has no CUDA resources");
  // Every kernel, copy and library call of a context goes through here: its
  // device becomes the thread's current one (a thread-local read when it
  // already is, the usual case).
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != r->device)
    check(cudaSetDevice(r->device), "cudaSetDevice");
  return *r;
}

}  // namespace ssm::cuda
