// A trainer's steps replayed from one recording (a CUDA graph of forward,
// backward, clip and AdamW) where the backend records them
// (BackendResources' step recording in context.h): on by default where the
// backend records, off with SSM_CUDA_TRAIN_GRAPH=0, read when the trainer
// is made. Two steps of a
// shape run as ever (workspaces grow, cuBLAS picks its kernels, the bf16
// weight copies and AdamW's table are made), the third is recorded and
// run, and the later ones of that shape replay it. Where a step cannot be
// recorded (data parallel, accumulation, dropout, a gradient hook, a
// clip or update that waits for the host, an op that cannot be captured)
// the step runs as ever, with the same results. The replays leave every
// weight equal to the bit to the steps run op by op
// (tests/gpu/train_step_graph_cuda_test.cpp, an H100 on 2026-12-07): the
// recorded inputs have buffers of their own, not blocks of the capture's
// pool, which the step's tensors reused (the NaN of docs/CUDA.md's
// eleventh session).
#pragma once

#include <cstdint>
#include <functional>

#include "ssm/ops/context.h"

namespace ssm {

class StepGraph {
 public:
  // `wanted`: the step's shape allows a recording at all (the trainer's
  // options); the environment switch decides the rest.
  StepGraph(Context& ctx, bool wanted);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Runs a step's device work through the recording: replays it, or
  // records `work` (which returns false when the step it queued cannot be
  // replayed) and runs the recording. Returns false when the caller must
  // run the step itself; `undo` has then put back what a failed recording
  // changed on the host.
  bool run(const BackendResources::StepInputs& inputs, const std::function<bool()>& work,
           const std::function<void()>& undo);
  // Drops the recording (the weights were written from outside the step,
  // e.g. by a checkpoint: a recorded step reads the bf16 weight copies its
  // update wrote and would not convert them again); the next steps warm up
  // and record anew.
  void restart();
  bool on() const { return on_; }
  bool recorded() const { return recorded_; }

 private:
  static constexpr int kWarmups = 2;
  Context& ctx_;
  bool on_ = false;
  bool recorded_ = false;
  int eager_ = 0;  // steps of the shape run as ever
  Shape shape_;    // of the ids the recording was made for
};

}  // namespace ssm
