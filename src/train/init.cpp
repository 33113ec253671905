// Initialisation rules by parameter name, as the reference does it: the
// embedding N(0, 0.02), Linear weights Kaiming-uniform (a = sqrt(5), i.e.
// U(+-1/sqrt(fan_in))), residual output projections scaled by 1/sqrt(n_layer),
// Linear biases zero, conv1d PyTorch's default, dt log-uniform, A_log = log
// U[lo, hi], D and norms 1, Mamba-3 biases 1 and MIMO mixes 1/R or 1.
#include <cmath>
#include <string_view>

#include "ssm/train/init.h"

namespace ssm {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The layer index of a "...layers.<i>." name, or -1.
int64_t layer_of(const std::string& name) {
  const size_t at = name.find("layers.");
  if (at == std::string::npos) return -1;
  return std::stoll(name.substr(at + 7));
}

}  // namespace

// Uniform and normal draws defined here, not by the standard library's
// distributions, so that a seed gives the same model everywhere.
ParamInitializer::ParamInitializer(const ModelConfig& config, uint64_t seed) : config_(config), rng_(seed) {}

double ParamInitializer::uniform(double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

double ParamInitializer::normal(double stddev) {  // Box-Muller
  const double u1 = 1.0 - uniform(0, 1), u2 = uniform(0, 1);
  return stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

Tensor ParamInitializer::next(const std::string& name, const Shape& shape) {
  const ModelConfig& c = config_;
  const double residual_scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, c.n_layer)));
  Tensor value = Tensor::empty(DType::kF32, shape);
  float* v = value.data<float>();
  const int64_t n = value.numel();
  auto fill = [&](auto&& f) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(f(i));
  };
  auto kaiming = [&](double scale) {
    int64_t fan_in = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    fill([&](int64_t) { return uniform(-bound, bound) * scale; });
  };
  const int64_t layer = layer_of(name);
  const bool mamba3 = layer >= 0 && c.mixer_kind(layer) == MixerKind::kMamba3;

  if (name == c.embedding_name()) fill([&](int64_t) { return normal(0.02); });
  else if (name == "lm_head.weight") kaiming(1.0);
  else if (ends_with(name, "norm.weight") || ends_with(name, "norm2.weight") ||
           ends_with(name, "norm_f.weight") || ends_with(name, ".D") ||
           ends_with(name, "B_bias") || ends_with(name, "C_bias") || ends_with(name, "mimo_z"))
    fill([](int64_t) { return 1.0; });
  else if (ends_with(name, "in_proj.weight") || ends_with(name, "fc1.weight") ||
           ends_with(name, "x_proj.weight") || ends_with(name, "dt_proj.weight"))
    kaiming(1.0);
  else if (ends_with(name, "out_proj.weight") || ends_with(name, "fc2.weight")) kaiming(residual_scale);
  // The HF families' other projections (attention, MLPs, Granite's shared
  // MLP and router) as Linear layers, their outputs into the residual scaled.
  else if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight") ||
           ends_with(name, "output_linear.weight"))
    kaiming(residual_scale);
  else if (ends_with(name, "_proj.weight") || ends_with(name, "input_linear.weight") ||
           ends_with(name, "router.layer.weight") || ends_with(name, "gate.weight"))
    kaiming(1.0);
  else if (ends_with(name, "proj.bias")) fill([](int64_t) { return 0.0; });
  else if (ends_with(name, "conv1d.weight")) kaiming(1.0);
  else if (ends_with(name, "conv1d.bias")) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(c.mamba2.d_conv));
    fill([&](int64_t) { return uniform(-bound, bound); });
  } else if (ends_with(name, "dt_bias")) {
    const double lo = mamba3 ? c.mamba3.dt_min : c.mamba2.dt_min;
    const double hi = mamba3 ? c.mamba3.dt_max : c.mamba2.dt_max;
    const double floor = mamba3 ? c.mamba3.dt_init_floor : c.mamba2.dt_init_floor;
    fill([&](int64_t) {
      const double dt = std::max(
          floor, std::exp(uniform(0, 1) * (std::log(hi) - std::log(lo)) + std::log(lo)));
      return dt + std::log(-std::expm1(-dt));  // the inverse of softplus
    });
  } else if (ends_with(name, "A_log"))
    fill([&](int64_t) { return std::log(uniform(c.mamba2.A_init_lo, c.mamba2.A_init_hi)); });
  else if (ends_with(name, "mimo_x") || ends_with(name, "mimo_o"))
    fill([&](int64_t) { return 1.0 / static_cast<double>(c.mamba3.rank()); });
  else
    throw Error(cat("no initialisation rule for parameter '", name, "'"));
  return value;
}

void initialize_model(LanguageModel& model, uint64_t seed) {
  ParamInitializer init(model.config(), seed);
  model.for_each_param([&](const std::string& name, Param& p) { p.value = init.next(name, p.shape); });
}

ShardedWriteResult write_initialized_model(const std::string& config_text, const std::string& origin,
                                           const std::filesystem::path& dir, uint64_t seed,
                                           DType projections, const ShardedWriteOptions& options) {
  SSM_CHECK(projections == DType::kF32 || projections == DType::kBF16 || projections == DType::kF16,
            "models are initialised in F32, BF16 or F16, not ", dtype_name(projections));
  // Building the model allocates no weights: it gives the names and shapes.
  LanguageModel model(parse_model_config(parse_json(config_text, origin), origin));
  std::vector<TensorSpec> specs;
  model.for_each_param([&](const std::string& name, Param& p) {
    const bool projection = p.role == ParamRole::kWeight && p.shape.size() == 2;
    specs.push_back({name, projection ? projections : DType::kF32, p.shape});
  });
  ParamInitializer init(model.config(), seed);
  ShardedWriteOptions with_config = options;
  with_config.companions.emplace_back("config.json", config_text);
  return write_sharded_safetensors(
      dir, specs,
      [&](size_t i) {
        Tensor value = init.next(specs[i].name, specs[i].shape);
        return specs[i].dtype == DType::kF32 ? value : value.to_dtype(specs[i].dtype);
      },
      with_config);
}

}  // namespace ssm
