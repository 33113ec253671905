// ssm info MODEL_DIR: architecture, parameter count and memory.
#include <cstdio>

#include "cli/commands.h"
#include "ssm/model/language_model.h"

namespace ssm::cli {
namespace {

const char* mixer_name(MixerKind k) {
  switch (k) {
    case MixerKind::kMamba2: return "mamba2";
    case MixerKind::kMamba3: return "mamba3";
    case MixerKind::kAttention: return "attention";
  }
  return "?";
}

int run_info(const std::string& dir) {
  LanguageModel model = LanguageModel::load(dir, load_options());
  const ModelConfig& c = model.config();
  std::printf("model:       %s\n", dir.c_str());
  std::printf("convention:  %s\n", c.convention == Convention::kHuggingFace ? "huggingface" : "state-spaces");
  std::printf("d_model:     %lld\n", static_cast<long long>(c.d_model));
  std::printf("n_layer:     %lld\n", static_cast<long long>(c.n_layer));
  std::printf("vocab:       %lld (padded %lld)\n", static_cast<long long>(c.vocab_size),
              static_cast<long long>(c.padded_vocab()));
  std::string schedule;
  for (int64_t i = 0; i < c.n_layer; ++i) schedule += (i ? " " : "") + std::string(mixer_name(c.mixer_kind(i)));
  std::printf("layers:      %s%s\n", schedule.c_str(), c.has_mlp() ? " (each with MLP)" : "");
  if (c.ssm_kind == MixerKind::kMamba2) {
    const Mamba2Config& m = c.mamba2;
    std::printf("mamba2:      d_state %lld, headdim %lld, heads %lld, ngroups %lld, d_conv %lld, chunk %lld\n",
                (long long)m.d_state, (long long)m.headdim, (long long)m.nheads(),
                (long long)m.ngroups, (long long)m.d_conv, (long long)m.chunk_size);
  } else {
    const Mamba3Config& m = c.mamba3;
    std::printf("mamba3:      d_state %lld, headdim %lld, heads %lld, ngroups %lld, %s rank %lld, "
                "rope_fraction %g, chunk %lld\n",
                (long long)m.d_state, (long long)m.headdim, (long long)m.nheads(),
                (long long)m.ngroups, m.is_mimo ? "MIMO" : "SISO", (long long)m.rank(),
                m.rope_fraction, (long long)m.chunk_size);
  }
  const int64_t n = model.parameter_count();
  std::printf("parameters:  %lld (%.2f M)\n", static_cast<long long>(n), n / 1e6);
  std::printf("memory:      %.2f MiB as F32 weights\n", n * 4.0 / (1 << 20));
  // Decode state per sequence: every tensor of a batch-1 state.
  ModelState st = model.make_state(1);
  int64_t state_bytes = 0;
  for (auto& l : st.layers)
    if (l)
      for (auto& [name, t] : l->tensors()) state_bytes += static_cast<int64_t>(t->nbytes());
  std::printf("state:       %.1f KiB per sequence (recurrent state; KV caches grow with length)\n",
              state_bytes / 1024.0);
  return 0;
}

void setup_info(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("info", "print a model's architecture, parameters and memory");
  add_max_memory_option(*cmd);
  static std::string dir;
  cmd->add_option("MODEL", dir, "model directory (config.json + weights)")->required();
  cmd->callback([&action] { action = [] { return run_info(dir); }; });
}

}  // namespace

SSM_COMMAND(info, setup_info);

}  // namespace ssm::cli
