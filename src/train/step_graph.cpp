#include "ssm/train/step_graph.h"

#include <cstdlib>
#include <string_view>

namespace ssm {

StepGraph::StepGraph(Context& ctx, bool wanted) : ctx_(ctx) {
  const char* env = std::getenv("SSM_CUDA_TRAIN_GRAPH");
  const bool off = env && std::string_view(env) == "0";
  on_ = wanted && !off && ctx.resources() && !ctx.device().is_host();
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
