// CudaResources' recorded training step (BackendResources in context.h):
// captured from the stream like the decode graphs (runtime.cpp), but with
// the allocator's private pool around the capture (graph_pool.h), so that
// no block the graph uses outlives it or gets another owner, and with the
// step's host inputs refilled before each replay (step_record.h).
#include "ops/cuda/step_record.h"

#include <cstring>

#include "ops/cuda/runtime.h"
#include "ssm/core/error.h"

namespace ssm::cuda {

StepRecording::~StepRecording() {
  if (exec) cudaGraphExecDestroy(exec);
  for (Input& in : inputs)
    if (in.stage) cudaFree(in.stage);
  inputs.clear();
  release_graph_pool(pool);
}

bool CudaResources::copy_step_input_queued(void* dst, const void* src, size_t bytes,
                                           const StepInputFill& refill) {
  if (!recording_) return copy_from_host_queued(dst, src, bytes);
  const DeviceGuard on(device);
  // Not from the capture's pool (step_record.h): cudaMalloc is allowed in a
  // relaxed capture and is no node of the graph.
  StepRecording::Input in{.bytes = bytes, .refill = refill};
  check(cudaMalloc(&in.stage, bytes > 0 ? bytes : 1), "cudaMalloc (recorded step input)");
  recording_->inputs.push_back(std::move(in));
  check(cudaMemcpyAsync(dst, recording_->inputs.back().stage, bytes, cudaMemcpyDeviceToDevice, stream),
        "recorded copy of a step input");
  return true;
}

bool CudaResources::begin_step_record(uint64_t key) {
  const DeviceGuard on(device);
  SSM_CHECK(!recording_, "cuda: a training step is already being recorded");
  steps_.erase(key);
  auto rec = std::make_unique<StepRecording>();
  rec->pool = begin_graph_pool(device, stream);
  // Relaxed: the caching allocator runs on this thread meanwhile. Anything
  // that waits for the stream (a host copy through the legacy default
  // stream) invalidates the capture: end_step_record then fails.
  const cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return false;  // rec (and its pool) go
  }
  recording_ = std::move(rec);
  recording_key_ = key;
  return true;
}

bool CudaResources::end_step_record(uint64_t key, const StepInputs& inputs) {
  const DeviceGuard on(device);
  SSM_CHECK(recording_ && recording_key_ == key, "cuda: no training step is being recorded");
  std::unique_ptr<StepRecording> rec = std::move(recording_);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  end_graph_pool_capture(rec->pool);
  bool whole = ended == cudaSuccess && graph;
  for (const StepRecording::Input& in : rec->inputs) whole = whole && static_cast<bool>(in.refill);
  if (whole) {
    const cudaError_t made = cudaGraphInstantiate(&rec->exec, graph, 0);
    whole = made == cudaSuccess;
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // an invalidated capture's error is not the next call's
  if (!whole) return false;
  steps_[key] = std::move(rec);
  return replay_step(key, inputs);
}

bool CudaResources::replay_step(uint64_t key, const StepInputs& inputs) {
  const auto it = steps_.find(key);
  if (it == steps_.end()) return false;
  const DeviceGuard on(device);
  StepRecording& rec = *it->second;
  for (StepRecording::Input& in : rec.inputs) {
    rec.host.resize(in.bytes);
    in.refill(inputs, rec.host.data());
    copy_from_host_queued(in.stage, rec.host.data(), in.bytes);
  }
  check(cudaGraphLaunch(rec.exec, stream), "cudaGraphLaunch (training step)");
  return true;
}

void CudaResources::drop_step_record(uint64_t key) {
  const DeviceGuard on(device);
  if (recording_ && recording_key_ == key) {
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    end_graph_pool_capture(recording_->pool);
    recording_.reset();
  }
  steps_.erase(key);
}

}  // namespace ssm::cuda
