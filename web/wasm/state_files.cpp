// The session as the engine's state files (the bytes `ssm generate
// --session` reads and writes), and its tensors one by one for a state
// held outside the module (the WebGPU backend's).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "model_module.h"
#include "ssm/io/atomic_file.h"
#include "ssm/layers/attention_layer.h"
#include "ssm/model/state_file.h"

namespace ssm::web {
namespace {

// Where a state passes through the in-memory file system: the engine's own
// state-file writer and reader make and check the bytes.
constexpr const char* kStatePath = "/tmp/ssm-session.state";

bool is_kv_cache(const std::string& name) { return name.ends_with(".k") || name.ends_with(".v"); }

}  // namespace

// The session as the bytes of a state file.
val Model::state() {
  return guarded([&] {
    check_loaded();
    save_state(kStatePath, session_, fingerprint_);
    const std::string bytes = read_file(kStatePath);
    std::filesystem::remove(kStatePath);
    return val::global("Uint8Array")
        .new_(emscripten::typed_memory_view(bytes.size(),
                                            reinterpret_cast<const uint8_t*>(bytes.data())));
  });
}

// The session from a state file's bytes; an error (and the session as it
// was) when they are not a state file of this model.
val Model::restore(const std::string& bytes) {
  return guarded([&] {
    check_loaded();
    write_file_atomically(kStatePath, [&](FileWriter& w) { w.write(bytes); });
    std::optional<SessionState> loaded;
    try {
      loaded = load_state(kStatePath, *model_, fingerprint_);
    } catch (...) {
      std::filesystem::remove(kStatePath);
      throw;
    }
    std::filesystem::remove(kStatePath);
    if (loaded->batch() != 1)
      throw Error(cat("restore: the state holds ", loaded->batch(), " sequences, not one"));
    session_ = std::move(*loaded);
    run_.reset();
    return json_value(info());
  });
}

// The session's layer-state tensors, each {name, dtype, shape: a JSON
// array, data: the bytes}, KV caches cut to their length; and the
// position. For a state held outside the module (WebGPU) after restore().
val Model::stateTensors() {
  return guarded([&] {
    check_loaded();
    val list = val::array();
    for (auto& [name, t] : session_tensors()) {
      Tensor v = *t;
      if (auto* a = attention_of(name)) {
        int64_t len = 0;
        for (int64_t b = 0; b < a->batch(); ++b) len = std::max(len, a->length(b));
        if (is_kv_cache(name)) v = v.slice(2, 0, len).clone();
      }
      val e = val::object();
      e.set("name", name);
      e.set("dtype", std::string(dtype_name(v.dtype())));
      e.set("shape", Json(std::vector<int64_t>(v.shape().begin(), v.shape().end())).dump());
      e.set("data", val::global("Uint8Array")
                        .new_(emscripten::typed_memory_view(v.nbytes(),
                                                            static_cast<const uint8_t*>(v.raw()))));
      list.call<void>("push", e);
    }
    val out = val::object();
    out.set("tensors", list);
    out.set("position", static_cast<double>(session_.model.position));
    return out;
  });
}

// One layer-state tensor from outside (WebGPU's exportState()): its name,
// shape (a JSON array) and bytes. The dtype and every dimension but a KV
// cache's length must be those the model's state has.
val Model::setStateTensor(const std::string& name, const std::string& shape_json,
                          const std::string& bytes) {
  return guarded([&] {
    check_loaded();
    Tensor* target = nullptr;
    for (auto& [n, t] : session_tensors())
      if (n == name) target = t;
    if (!target) throw Error(cat("state: the model's state has no tensor '", name, "'"));
    const auto dims = parse_json(shape_json, "state tensor shape").get<std::vector<int64_t>>();
    const Shape shape(dims.begin(), dims.end());
    const bool cache = attention_of(name) && is_kv_cache(name);
    bool fits = shape.size() == target->shape().size();
    for (size_t d = 0; fits && d < shape.size(); ++d)
      fits = shape[d] == target->shape()[d] || (cache && d == 2);
    if (!fits)
      throw Error(cat("state: tensor '", name, "' is ", shape_str(shape), ", the model's ",
                      shape_str(target->shape())));
    Tensor t = Tensor::empty(target->dtype(), shape);
    if (t.nbytes() != bytes.size())
      throw Error(cat("state: tensor '", name, "' has ", bytes.size(), " bytes, its shape needs ",
                      t.nbytes()));
    std::memcpy(t.raw(), bytes.data(), bytes.size());
    *target = std::move(t);
    return val::object();
  });
}

std::vector<std::pair<std::string, Tensor*>> Model::session_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < session_.model.layers.size(); ++i)
    if (session_.model.layers[i])
      for (auto& [name, t] : session_.model.layers[i]->tensors())
        out.emplace_back(cat("layers.", i, ".", name), t);
  return out;
}

AttentionState* Model::attention_of(const std::string& name) {
  const size_t dot = name.find('.', 7);  // after "layers."
  if (dot == std::string::npos) return nullptr;
  const size_t i = std::stoul(name.substr(7, dot - 7));
  if (i >= session_.model.layers.size()) return nullptr;
  return dynamic_cast<AttentionState*>(session_.model.layers[i].get());
}

}  // namespace ssm::web
