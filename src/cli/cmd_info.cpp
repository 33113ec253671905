// ssm info MODEL: architecture, parameter count, memory, and the weights as
// stored (dtype by dtype, or tensor by tensor with --tensors) with the dtype
// --dtype auto loads the projections in; --json prints the same as one
// document.
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "cli/json_out.h"
#include "ssm/io/checkpoint.h"
#include "ssm/model/language_model.h"

namespace ssm::cli {
namespace {

struct InfoArgs {
  std::string model;
  bool json = false, tensors = false;
  ComputeOptions compute;
};

const char* mixer_name(MixerKind k) {
  switch (k) {
    case MixerKind::kMamba1: return "mamba1";
    case MixerKind::kMamba2: return "mamba2";
    case MixerKind::kMamba3: return "mamba3";
    case MixerKind::kAttention: return "attention";
    case MixerKind::kMlp: return "mlp";
    case MixerKind::kMoe: return "moe";
  }
  return "?";
}

OrderedJson mixer_json(const ModelConfig& c) {
  if (c.ssm_kind == MixerKind::kMamba1) {
    const Mamba1Config& m = c.mamba1;
    return {{"kind", "mamba1"}, {"d_state", m.d_state}, {"d_inner", m.d_inner}, {"dt_rank", m.dt_rank},
            {"d_conv", m.d_conv}, {"bcdt_norm", m.bcdt_norm}};
  }
  if (c.ssm_kind == MixerKind::kMamba2) {
    const Mamba2Config& m = c.mamba2;
    return {{"kind", "mamba2"}, {"d_state", m.d_state}, {"headdim", m.headdim}, {"heads", m.nheads()},
            {"ngroups", m.ngroups}, {"d_conv", m.d_conv}, {"chunk_size", m.chunk_size}};
  }
  const Mamba3Config& m = c.mamba3;
  return {{"kind", "mamba3"}, {"d_state", m.d_state}, {"headdim", m.headdim}, {"heads", m.nheads()},
          {"ngroups", m.ngroups}, {"mimo", m.is_mimo}, {"rank", m.rank()}, {"rope_fraction", m.rope_fraction},
          {"chunk_size", m.chunk_size}};
}

// The weights as the files hold them: every tensor, and the totals per dtype.
OrderedJson stored_json(const std::string& dir) {
  const std::unique_ptr<TensorSource> source = open_checkpoint(dir);
  OrderedJson tensors = OrderedJson::array();
  std::map<std::string, std::pair<int64_t, uint64_t>> by_dtype;
  for (const std::string& name : source->names()) {
    const std::optional<Tensor> t = source->find(name);
    if (!t) continue;
    const std::string dtype(dtype_name(t->dtype()));
    tensors.push_back({{"name", name}, {"dtype", dtype}, {"shape", t->shape()}, {"bytes", t->nbytes()}});
    by_dtype[dtype].first += 1;
    by_dtype[dtype].second += t->nbytes();
  }
  OrderedJson totals = OrderedJson::object();
  for (const auto& [dtype, count_bytes] : by_dtype)
    totals[dtype] = {{"tensors", count_bytes.first}, {"bytes", count_bytes.second}};
  return {{"source", source->describe()}, {"by_dtype", totals}, {"tensors", tensors}};
}

// The projections' dtypes as stored and what --dtype auto loads them as.
OrderedJson projections_json(LanguageModel& model, const std::string& dir) {
  const LanguageModel::AutoWeights w = model.auto_weights(*open_checkpoint(dir));
  std::vector<std::string> stored;
  for (DType d : w.stored) stored.emplace_back(dtype_name(d));
  return {{"stored", stored},
          {"auto", weight_dtype_name(w.dtype)},
          {"loaded", weight_dtype_name(model.projection_dtype())}};
}

OrderedJson info_json(const std::string& dir, const ComputeOptions& compute) {
  LanguageModel model = LanguageModel::load(dir, load_options(compute));
  const ModelConfig& c = model.config();
  std::vector<std::string> layers;
  // Falcon-H1's layers run attention beside Mamba-2; Zamba2's hybrid layers
  // run a shared attention block before theirs.
  for (int64_t i = 0; i < c.n_layer; ++i)
    layers.push_back(cat(c.shared_use(i) >= 0 ? "shared_attention+" : "", mixer_name(c.mixer_kind(i)),
                         c.parallel_attention ? "+attention" : ""));
  // Each layer's MLP sub-block (Jamba mixes mixtures of experts and plain MLPs).
  std::vector<std::string> mlps;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const SequenceLayer* mlp = model.mlp(i);
    mlps.push_back(!mlp ? "none" : mlp->kind() == "moe" ? "moe" : "gated");
  }
  // Decode state per sequence: every tensor of a batch-1 state.
  ModelState st = model.make_state(1);
  uint64_t state_bytes = 0;
  for (auto& l : st.layers)
    if (l)
      for (auto& [name, t] : l->tensors()) state_bytes += t->nbytes();
  return {{"model", dir},
          {"convention", c.convention == Convention::kHuggingFace ? "huggingface" : "state-spaces"},
          {"family", c.family},
          {"d_model", c.d_model},
          {"n_layer", c.n_layer},
          {"vocab_size", c.vocab_size},
          {"padded_vocab_size", c.padded_vocab()},
          {"layers", layers},
          {"mlp", c.has_mlp()},
          {"mlp_kind", !c.has_mlp() ? "none" : c.moe_mlp ? "moe" : !c.sparse_moe_layers.empty() ? "mixed" : "gated"},
          {"mlp_layers", mlps},
          {"mixer", mixer_json(c)},
          {"parameters", model.parameter_count()},
          {"memory_bytes", model_memory_bytes(model, model.projection_dtype())},
          {"projections", projections_json(model, dir)},
          {"state_bytes_per_sequence", state_bytes},
          {"kv_cache_bytes_per_token", kv_cache_bytes_per_token(c)},
          {"stored", stored_json(dir)}};
}

void print_text(const OrderedJson& j, bool tensors) {
  auto line = [](const char* key, const std::string& value) { std::printf("%-13s%s\n", key, value.c_str()); };
  std::string schedule;
  for (const auto& l : j["layers"]) schedule += (schedule.empty() ? "" : " ") + l.get<std::string>();
  const OrderedJson& m = j["mixer"];
  const std::string kind = m["kind"];
  line("model:", j["model"]);
  line("convention:", j["convention"]);
  line("family:", j["family"]);
  line("d_model:", j["d_model"].dump());
  line("n_layer:", j["n_layer"].dump());
  line("vocab:", cat(j["vocab_size"].dump(), " (padded ", j["padded_vocab_size"].dump(), ")"));
  const std::string mlp = j["mlp_kind"] == "moe" ? " (each with a mixture-of-experts MLP)" : " (each with MLP)";
  line("layers:", schedule + (j["mlp"].get<bool>() && j["mlp_kind"] != "mixed" ? mlp : ""));
  if (j["mlp_kind"] == "mixed") {
    std::string mlps;
    for (const auto& l : j["mlp_layers"]) mlps += (mlps.empty() ? "" : " ") + l.get<std::string>();
    line("mlps:", mlps);
  }
  if (kind == "mamba1") {
    line("mamba1:", cat("d_state ", m["d_state"].dump(), ", d_inner ", m["d_inner"].dump(), ", dt_rank ",
                        m["dt_rank"].dump(), ", d_conv ", m["d_conv"].dump(),
                        m["bcdt_norm"].get<bool>() ? ", RMS norms of dt, B, C" : ""));
  } else {
    std::string mixer = cat("d_state ", m["d_state"].dump(), ", headdim ", m["headdim"].dump(), ", heads ",
                            m["heads"].dump(), ", ngroups ", m["ngroups"].dump());
    if (kind == "mamba2") mixer += cat(", d_conv ", m["d_conv"].dump());
    else mixer += cat(", ", m["mimo"].get<bool>() ? "MIMO" : "SISO", " rank ", m["rank"].dump(), ", rope_fraction ",
                      m["rope_fraction"].get<double>());
    line((kind + ":").c_str(), mixer + cat(", chunk ", m["chunk_size"].dump()));
  }
  const int64_t n = j["parameters"];
  char millions[32];
  std::snprintf(millions, sizeof millions, "%.2f", static_cast<double>(n) / 1e6);
  line("parameters:", cat(n, " (", millions, " M)"));
  const OrderedJson& p = j["projections"];
  line("memory:", cat(format_bytes(j["memory_bytes"]), " loaded (projections as ", p["loaded"].get<std::string>(),
                      ", the rest F32)"));
  std::string stored_as;
  for (const auto& d : p["stored"]) stored_as += (stored_as.empty() ? "" : ", ") + d.get<std::string>();
  line("dtype:", cat("projections stored as ", stored_as, "; --dtype auto loads them as ", p["auto"].get<std::string>(),
                     p["stored"].size() > 1 ? " (stored in several dtypes: none loses precision)" : ""));
  std::string state = format_bytes(j["state_bytes_per_sequence"]) + " per sequence";
  if (j["kv_cache_bytes_per_token"].get<uint64_t>() > 0)
    state += ", plus " + format_bytes(j["kv_cache_bytes_per_token"]) + " per token of attention caches";
  line("state:", state);
  const OrderedJson& stored = j["stored"];
  std::string by_dtype;
  for (const auto& [dtype, t] : stored["by_dtype"].items())
    by_dtype += cat(by_dtype.empty() ? "" : "; ", dtype, " ", t["tensors"].dump(), " tensors, ", format_bytes(t["bytes"]));
  line("stored:", cat(stored["source"].get<std::string>(), ": ", by_dtype));
  if (!tensors) return;
  for (const auto& t : stored["tensors"]) {
    std::string shape;
    for (const auto& d : t["shape"]) shape += (shape.empty() ? "" : ", ") + d.dump();
    std::printf("  %-48s %-5s (%s) %s\n", t["name"].get<std::string>().c_str(),
                t["dtype"].get<std::string>().c_str(), shape.c_str(), format_bytes(t["bytes"]).c_str());
  }
}

int run_info(const InfoArgs& a) {
  const OrderedJson j = info_json(a.model, a.compute);
  if (a.json) print_json(j);
  else print_text(j, a.tensors);
  return 0;
}

void setup_info(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("info", "print a model's architecture, parameters, memory and stored dtypes");
  static InfoArgs a;
  add_model_argument(*cmd, a.model, "model directory (config.json + weights)", WithoutModel::builtin);
  cmd->add_flag("--json", a.json, "print one JSON document (every tensor included)");
  cmd->add_flag("--tensors", a.tensors, "list every stored tensor: name, dtype, shape, bytes");
  add_max_memory_option(*cmd, a.compute);
  cmd->callback([&action] { action = [] { return run_info(a); }; });
}

}  // namespace

SSM_COMMAND(info, setup_info);

}  // namespace ssm::cli
