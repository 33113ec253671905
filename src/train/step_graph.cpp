#include "ssm/train/step_graph.h"

#include <cstdlib>
#include <string_view>

#include "ssm/core/log.h"

namespace ssm {

StepGraph::StepGraph(Context& ctx, bool wanted) : ctx_(ctx) {
  const char* env = std::getenv("SSM_CUDA_TRAIN_GRAPH");
  on_ = wanted && env && std::string_view(env) == "1" && ctx.resources() && !ctx.device().is_host();
  // Kept opt-in and said at every use until the card agrees (the tests in
  // tests/gpu/train_step_graph_cuda_test.cpp reproduced the NaN).
  if (on_)
    log_warning("SSM_CUDA_TRAIN_GRAPH=1: the replayed training step's NaN (docs/CUDA.md, eleventh ",
                "session) has a fix (twelfth session) not yet run on a GPU; compare its losses with a run without it");
}

StepGraph::~StepGraph() {
  if (BackendResources* r = ctx_.resources()) r->drop_step_record(reinterpret_cast<uintptr_t>(this));
}

void StepGraph::restart() {
  if (!on_) return;
  ctx_.resources()->drop_step_record(reinterpret_cast<uintptr_t>(this));
  recorded_ = false;
  eager_ = 0;
}

bool StepGraph::run(const BackendResources::StepInputs& inputs, const std::function<bool()>& work,
                    const std::function<void()>& undo) {
  if (!on_) return false;
  BackendResources& r = *ctx_.resources();
  const uint64_t key = reinterpret_cast<uintptr_t>(this);
  if (inputs.ids.shape() != shape_) {  // a new shape warms up and records anew
    r.drop_step_record(key);
    recorded_ = false;
    eager_ = 0;
    shape_ = inputs.ids.shape();
  }
  if (recorded_) return r.replay_step(key, inputs);
  if (eager_++ < kWarmups) return false;
  if (!r.begin_step_record(key)) {
    on_ = false;
    return false;
  }
  bool whole = false;
  try {
    whole = work();
  } catch (...) {
    // Most likely the capture's own failure (a host wait): the step runs
    // as ever, and a real error shows there again.
    whole = false;
  }
  if (whole && r.end_step_record(key, inputs)) {
    recorded_ = true;
    return true;
  }
  r.drop_step_record(key);
  undo();
  on_ = false;
  return false;
}

}  // namespace ssm
