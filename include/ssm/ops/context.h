// The context a computation runs in: which backend computes, with what
// threads, handles and workspace. Passed explicitly to every op and layer; no
// mutable globals hold threads, streams or library handles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "ssm/core/thread_pool.h"
#include "ssm/tensor/arena.h"
#include "ssm/tensor/tensor.h"

namespace ssm {

class Backend;

// Per-context resources a backend keeps (a CUDA stream and cuBLAS handle);
// host backends keep none.
class BackendResources {
 public:
  virtual ~BackendResources() = default;

  // Recorded replays (CUDA graphs) of a sequence of ops that a caller runs
  // again and again on the same buffers, such as the model's decode step.
  // `key` names the sequence and every buffer it touches. replay() runs the
  // recording of key and returns true, or returns false when there is none;
  // then the caller runs the ops itself, between begin_record() and
  // end_record() when should_record(key) says so (the key seen before, so
  // that workspaces have grown and nothing is allocated while recording).
  // end_record() also runs what was recorded; abandon_record() drops it when
  // an op failed. Host backends record nothing.
  virtual bool replay(uint64_t /*key*/) { return false; }
  virtual bool should_record(uint64_t /*key*/) { return false; }
  virtual void begin_record() {}
  virtual void end_record(uint64_t /*key*/) {}
  virtual void abandon_record() {}

  // F32 products computed on bf16 tensor cores (inputs rounded to bf16, F32
  // accumulation and results): mixed-precision training over F32 master
  // weights. Returns false where the backend has no such mode.
  virtual bool set_bf16_compute(bool /*on*/) { return false; }
  // Training's weights, for a backend that computes in bf16: it may keep
  // the bf16 copy of an F32 matrix inside [begin, begin + bytes) from its
  // first use until weights_changed(), instead of rounding it at every
  // use. The caller (the Trainer) promises that those bytes change only
  // before a weights_changed() call; forget_weights() drops every range and
  // copy (before the weights' memory is freed).
  virtual void keep_weight_copies(const void* /*begin*/, size_t /*bytes*/) {}
  virtual void weights_changed() {}
  virtual void forget_weights() {}
  // Where a fused update (ops::AdamWSlice::bf16) is to write the bf16 copy
  // of the n F32 weights at `weights` along with their new values, each
  // rounded to nearest even as the backend's own conversion rounds it: the
  // backend then takes that copy as fresh at the next weights_changed()
  // instead of converting the weights again. nullptr: no copy wanted (the
  // backend keeps none of these weights, or computes in F32).
  virtual void* bf16_copy_for_update(const float* /*weights*/, int64_t /*n*/) { return nullptr; }

  // Copies `bytes` of host memory to device memory `dst` in order with the
  // work queued on the context, without waiting for that work: the source
  // may be reused when it returns (the decode step's ids, so that the host
  // queues the next step while the device runs the last). Returns false
  // where the backend has no such copy; the caller then copies itself.
  virtual bool copy_from_host_queued(void* /*dst*/, const void* /*src*/, size_t /*bytes*/) {
    return false;
  }

  // A training step recorded whole (a CUDA graph of forward, backward, clip
  // and update) and replayed at later steps of the same shape. Every host
  // value such a step reads comes in through copy_step_input_queued, which says how
  // to make its bytes from the next step's StepInputs (`refill`); a plain
  // queued copy while recording makes the recording fail, as does
  // anything that cannot be recorded (a host wait): end_step_record() then
  // returns false, having run nothing, and the caller runs the step itself.
  // Host backends record nothing (begin_step_record() returns false).
  struct StepInputs {
    Tensor ids;       // (batch, length) on the host: the step's tokens
    double lr = 0;    // the schedule's rate for this step
    int64_t step = 0;  // AdamW's 1-based step count (bias corrections)
  };
  using StepInputFill = std::function<void(const StepInputs&, void* out)>;
  virtual bool copy_step_input_queued(void* dst, const void* src, size_t bytes,
                                      const StepInputFill& /*refill*/) {
    return copy_from_host_queued(dst, src, bytes);
  }
  // `key` names the recording (its trainer); one records at a time.
  virtual bool begin_step_record(uint64_t /*key*/) { return false; }
  // Ends the recording and, when it holds a whole step, runs it with
  // `inputs` (those of the step just recorded) and returns true.
  virtual bool end_step_record(uint64_t /*key*/, const StepInputs& /*inputs*/) { return false; }
  // Runs the recorded step with the next step's inputs; false when none.
  virtual bool replay_step(uint64_t /*key*/, const StepInputs& /*inputs*/) { return false; }
  // Drops the recorded step, or the recording in progress (its memory goes
  // back to the allocator).
  virtual void drop_step_record(uint64_t /*key*/) {}
};

class Context {
 public:
  // The cpu backend; n_threads <= 0 picks the number of hardware threads.
  explicit Context(int n_threads = 1);
  // A backend by name ("ref", "cpu", ...): ssm::Error naming the available
  // ones when it is not built in.
  Context(std::string_view backend, int n_threads);
  Context(const Backend& backend, int n_threads);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Backend& backend() const { return *backend_; }
  Device device() const;
  ThreadPool& pool() { return *pool_; }
  int threads() const { return pool_->size(); }
  // Workspace on the backend's device, shared by every op and layer of a call.
  Arena& arena() { return *arena_; }
  // Where a training forward puts what it keeps for the backward (see
  // Workspace): a second arena, used only while a caller holds a Scope on
  // it around a forward and its backward, so that the same bytes serve
  // every step instead of fresh pages from the system each time.
  Arena& kept_arena() { return *kept_arena_; }
  BackendResources* resources() { return resources_.get(); }

 private:
  const Backend* backend_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Arena> kept_arena_;
  std::unique_ptr<BackendResources> resources_;
};

}  // namespace ssm
