// A training step recorded as one CUDA graph (CudaResources' step
// recording, step_record.cpp). The step's host inputs (ids, targets, the
// embedding backward's rows by id, AdamW's scalars) are each copied inside
// the graph from a device buffer of their own, which the host refills
// through the queued staging copies before each replay: those copies queue
// behind the last replay on the stream, so the host may run ahead of the
// device as before, and no input is written while a replay still reads it.
// The buffers are the recording's alone for the whole replay, not blocks of
// the capture's pool: a block that the capture freed and handed out again
// is written by the graph's earlier work after the refill (an activation of
// the forward over AdamW's scalars gave every weight garbage from the first
// replay on, H100, 2026-12-07).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "ops/cuda/graph_pool.h"
#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::cuda {

struct StepRecording {
  struct Input {
    void* stage = nullptr;  // cudaMalloc'd, read by the graph's copy into the step's buffer
    size_t bytes = 0;
    BackendResources::StepInputFill refill;  // empty: a copy no replay can redo
  };
  std::vector<Input> inputs;
  std::vector<unsigned char> host;  // a refill's bytes, before their queued copy
  GraphPool* pool = nullptr;
  cudaGraphExec_t exec = nullptr;

  StepRecording() = default;
  StepRecording(const StepRecording&) = delete;
  StepRecording& operator=(const StepRecording&) = delete;
  // The graph, then the inputs' buffers, then the pool.
  ~StepRecording();
};

}  // namespace ssm::cuda
