// The objects the Python module hands out. A Model owns the engine's
// LanguageModel and the Context it computes in; every State, Stream and
// Trainer keeps its Model alive through a shared_ptr, so Python can drop the
// Model first. One computation at a time per model: `busy` is held while
// the GIL is released, since the Context's arena and pool are shared.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "ssm/model/generator.h"
#include "ssm/model/language_model.h"
#include "ssm/ops/context.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm::python {

struct ModelHandle {
  std::filesystem::path dir;  // where it was loaded from (config.json, tokenizer.json)
  LanguageModel model;
  Context ctx;
  std::mutex busy;
  uint64_t max_memory = 0;  // the limit it was loaded under (0: physical memory)
  // Streaming generations still running: they hold `busy` until their last
  // token, which a caller on the stream's own thread would wait for forever.
  std::atomic<int> streams{0};
  std::shared_ptr<Tokenizer> tokenizer;  // loaded on first use

  ModelHandle(std::filesystem::path dir_, LanguageModel model_, const std::string& backend, int threads)
      : dir(std::move(dir_)), model(std::move(model_)), ctx(backend, threads) {}

  // ssm::Error while a streaming generation of this model runs.
  void check_free() const;
  // The model's tokenizer; ssm::Error when its directory has none.
  std::shared_ptr<Tokenizer> get_tokenizer();
};
using ModelPtr = std::shared_ptr<ModelHandle>;

// A generation session of one model: what `ssm generate --session` saves.
struct StateHandle {
  StateHandle(ModelPtr owner_, SessionState session_) : owner(std::move(owner_)), session(std::move(session_)) {}

  ModelPtr owner;
  SessionState session;
  std::atomic<bool> in_use{false};  // a generation is advancing it on its own thread

  // ssm::Error unless this state belongs to model and is free to use.
  void check_usable(const ModelHandle& model) const;
};
using StatePtr = std::shared_ptr<StateHandle>;

// A deep copy of session (every layer state, pending token and history).
SessionState copy_session(ModelHandle& model, SessionState& session);

}  // namespace ssm::python
