// Training checkpoints: one safetensors file holding the weights, the AdamW
// moments and, in its metadata, the step, the sampler's state, the options,
// a fingerprint of the training tokens and a checksum of every tensor byte.
// It is written atomically; loading verifies everything before touching
// the model, so a bad file leaves the run as it was.
#include <cstring>
#include <map>

#include "ssm/io/safetensors.h"
#include "ssm/train/trainer.h"

namespace ssm {
namespace {

constexpr const char* kFormat = "ssm-train-checkpoint/1";

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t checksum(const NamedTensors& tensors) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [name, t] : tensors) {
    h = fnv1a(h, name.data(), name.size());
    h = fnv1a(h, t.raw(), t.nbytes());
  }
  return h;
}

std::string hex(uint64_t v) { return cat(std::hex, v); }

// Files hold host bytes: a tensor on the GPU is copied back first, so a
// checkpoint written on one device resumes on any other.
Tensor on_host(const Tensor& t) { return t.device() == Device::host() ? t : t.to(Device::host()); }

// Tensor names of a checkpoint, in the one order save and load agree on.
std::vector<std::string> tensor_names(LanguageModel& model, const AdamW& opt) {
  std::vector<std::string> names;
  model.for_each_param([&](const std::string& name, Param&) { names.push_back("param." + name); });
  std::map<const Param*, std::string> name_of;
  model.for_each_param([&](const std::string& name, Param& p) { name_of[&p] = name; });
  for (const TrainableSlice& s : opt.slices()) names.push_back("adam.m." + name_of.at(s.param));
  for (const TrainableSlice& s : opt.slices()) names.push_back("adam.v." + name_of.at(s.param));
  return names;
}

const std::string& meta(const SafetensorsFile& f, const std::string& key) {
  const auto it = f.metadata().find(key);
  if (it == f.metadata().end())
    throw Error(cat(f.path().string(), ": not a training checkpoint (metadata has no '", key, "')"));
  return it->second;
}

void check_format(const SafetensorsFile& f) {
  if (meta(f, "format") != kFormat)
    throw Error(cat(f.path().string(), ": not a training checkpoint (format '", meta(f, "format"),
                    "', expected '", kFormat, "')"));
}

}  // namespace

void save_model_weights(LanguageModel& model, const std::filesystem::path& file) {
  NamedTensors tensors;
  model.for_each_param([&](const std::string& name, Param& p) { tensors.emplace_back(name, on_host(p.value)); });
  save_safetensors(file, tensors, {{"format", "pt"}});
}

void Trainer::save_checkpoint(const std::filesystem::path& dir) {
  // The library (and Python) caller may name a directory that does not exist yet.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(cat(dir.string(), ": cannot create the checkpoint directory: ", ec.message()));
  save_model_weights(model_, dir / "model.safetensors");
  NamedTensors tensors;
  model_.for_each_param([&](const std::string& name, Param& p) { tensors.emplace_back("param." + name, on_host(p.value)); });
  const std::vector<std::string> names = tensor_names(model_, optimizer_);
  size_t k = tensors.size();
  for (Tensor& m : optimizer_.first_moments()) tensors.emplace_back(names[k++], on_host(m));
  for (Tensor& v : optimizer_.second_moments()) tensors.emplace_back(names[k++], on_host(v));
  const std::map<std::string, std::string> metadata = {
      {"format", kFormat},
      {"step", std::to_string(optimizer_.steps())},
      {"sampler", sampler_.state()},
      {"options", options_.to_json().dump()},
      {"data", hex(token_fingerprint(tokens_))},
      {"checksum", hex(checksum(tensors))}};
  save_safetensors(dir / "checkpoint.safetensors", tensors, metadata);
}

TrainOptions read_checkpoint_options(const std::filesystem::path& file) {
  const SafetensorsFile f = SafetensorsFile::open(file);
  check_format(f);
  return TrainOptions::from_json(parse_json(meta(f, "options"), file.string()), file.string());
}

void Trainer::load_checkpoint(const std::filesystem::path& file) {
  const std::string where = file.string();
  const SafetensorsFile f = SafetensorsFile::open(file);  // refuses truncated files
  check_format(f);
  const Json stored = parse_json(meta(f, "options"), where);
  if (stored != options_.to_json())
    throw Error(cat(where, ": the checkpoint was made with options ", stored.dump(),
                    "; this run has ", options_.to_json().dump(), " (resume with the same options)"));
  if (meta(f, "data") != hex(token_fingerprint(tokens_)))
    throw Error(cat(where, ": the checkpoint was made on other training data"));
  int64_t step = 0;
  try {
    size_t used = 0;
    step = std::stoll(meta(f, "step"), &used);
    if (used != meta(f, "step").size() || step < 0) throw std::invalid_argument("step");
  } catch (const std::exception&) {
    throw Error(cat(where, ": malformed step '", meta(f, "step"), "'"));
  }

  // Every tensor present, of the right shape and dtype, before anything changes.
  NamedTensors tensors;
  std::vector<Tensor*> targets;
  std::map<std::string, Param*> params;
  model_.for_each_param([&](const std::string& name, Param& p) { params["param." + name] = &p; });
  const std::vector<std::string> names = tensor_names(model_, optimizer_);
  size_t k = 0;
  for (const std::string& name : names) {
    Tensor* dst;
    if (k < params.size()) dst = &params.at(name)->value;
    else if (k < params.size() + optimizer_.slices().size())
      dst = &optimizer_.first_moments()[k - params.size()];
    else dst = &optimizer_.second_moments()[k - params.size() - optimizer_.slices().size()];
    ++k;
    if (!f.contains(name)) throw Error(cat(where, ": missing tensor '", name, "'"));
    const Tensor t = f.get(name);
    if (t.dtype() != DType::kF32 || t.shape() != dst->shape())
      throw Error(cat(where, ": tensor '", name, "' is ", dtype_name(t.dtype()), " ",
                      shape_str(t.shape()), ", expected F32 ", shape_str(dst->shape())));
    tensors.emplace_back(name, t);
    targets.push_back(dst);
  }
  if (hex(checksum(tensors)) != meta(f, "checksum"))
    throw Error(cat(where, ": checksum mismatch (the file is damaged)"));
  const std::string sampler_state = meta(f, "sampler");
  BatchSampler probe = sampler_;
  try {
    probe.restore(sampler_state);
  } catch (const Error& e) {
    throw Error(cat(where, ": ", e.what()));
  }

  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& src = tensors[i].second;
    Tensor& dst = *targets[i];
    if (dst.device() == Device::host())
      std::memcpy(dst.raw(), src.raw(), src.nbytes());
    else  // a checkpoint resumed on the GPU
      device_memory(dst.device()).copy_from_host(dst.device(), dst.raw(), src.raw(), src.nbytes());
  }
  if (BackendResources* r = ctx_.resources()) r->weights_changed();  // kept bf16 copies are stale
  graph_->restart();  // a recorded step would read them unconverted
  sampler_ = probe;
  optimizer_.set_steps(step);
}

}  // namespace ssm
