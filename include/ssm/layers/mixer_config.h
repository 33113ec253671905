// Hyper-parameters of each mixer kind, with the reference defaults.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

namespace ssm {

struct Mamba2Config {
  int64_t d_model = 0;
  int64_t d_state = 128;   // N
  int64_t d_conv = 4;      // K
  int64_t expand = 2;
  int64_t headdim = 64;    // P
  int64_t ngroups = 1;     // G
  int64_t chunk_size = 256;
  bool rmsnorm = true;
  bool norm_before_gate = false;
  bool proj_bias = false;  // in_proj.bias and out_proj.bias
  bool conv_bias = true;
  double dt_min = 0.001, dt_max = 0.1, dt_init_floor = 1e-4;
  double dt_limit_lo = 0.0, dt_limit_hi = std::numeric_limits<double>::infinity();
  double A_init_lo = 1.0, A_init_hi = 16.0;
  float norm_eps = 1e-5f;
  // Falcon-H1: an inner width of its own (mamba_d_ssm; 0: expand * d_model),
  // and its muP multipliers: the input times in_multiplier before in_proj,
  // then in_proj's output blocks z, x, B, C and dt each times its own factor.
  int64_t d_ssm = 0;
  float in_multiplier = 1.f;
  std::array<float, 5> part_multipliers = {1.f, 1.f, 1.f, 1.f, 1.f};

  int64_t d_inner() const { return d_ssm > 0 ? d_ssm : expand * d_model; }
  int64_t nheads() const { return d_inner() / headdim; }
  int64_t conv_dim() const { return d_inner() + 2 * ngroups * d_state; }
  bool has_multipliers() const {
    if (in_multiplier != 1.f) return true;
    for (float m : part_multipliers)
      if (m != 1.f) return true;
    return false;
  }
  int64_t d_in_proj() const { return 2 * d_inner() + 2 * ngroups * d_state + nheads(); }
};

// Mamba-1 (S6) as HF's MambaMixer and FalconMambaMixer have it.
struct Mamba1Config {
  int64_t d_model = 0;
  int64_t d_inner = 0;   // intermediate_size (expand * d_model)
  int64_t d_state = 16;  // N
  int64_t d_conv = 4;    // K
  int64_t dt_rank = 0;   // R: x_proj's dt columns, dt_proj's input
  bool proj_bias = false;  // in_proj.bias and out_proj.bias
  bool conv_bias = true;
  // FalconMamba: weightless RMS norms of dt, B and C after x_proj.
  bool bcdt_norm = false;
  // Jamba: those norms have weights (dt_layernorm, b_layernorm, c_layernorm).
  bool bcdt_norm_weights = false;
  float bcdt_eps = 1e-6f;

  int64_t d_x_proj() const { return dt_rank + 2 * d_state; }
};

struct Mamba3Config {
  int64_t d_model = 0;
  int64_t d_state = 128;
  int64_t expand = 2;
  int64_t headdim = 64;
  int64_t ngroups = 1;
  double rope_fraction = 0.5;
  double A_floor = 1e-4;
  bool is_outproj_norm = false;
  bool is_mimo = false;
  int64_t mimo_rank = 4;  // R as configured; rank() is 1 unless MIMO
  int64_t chunk_size = 64;
  double dt_min = 0.001, dt_max = 0.1, dt_init_floor = 1e-4;
  float norm_eps = 1e-5f;

  int64_t rank() const { return is_mimo ? mimo_rank : 1; }
  int64_t d_inner() const { return expand * d_model; }
  int64_t nheads() const { return d_inner() / headdim; }
  // Rotary entries: floor(N * rope_fraction), made even; angles = half.
  int64_t rope_split() const {
    int64_t s = static_cast<int64_t>(d_state * rope_fraction);
    return s - s % 2;
  }
  int64_t n_angles() const { return rope_split() / 2; }
  int64_t d_in_proj() const {
    return 2 * d_inner() + 2 * rank() * ngroups * d_state + 3 * nheads() + n_angles();
  }
};

// A mixture-of-experts MLP (Granite 4.0-H): E experts, k per token, each
// of hidden width F, and a shared expert of width shared_hidden (0: none).
struct MoeConfig {
  int64_t d_model = 0;
  int64_t experts = 0;      // E
  int64_t top_k = 1;        // k
  int64_t expert_hidden = 0;  // F
  int64_t shared_hidden = 0;  // 0: no shared expert
};

struct AttentionConfig {
  int64_t d_model = 0;
  int64_t num_heads = 0;
  int64_t num_heads_kv = 0;
  int64_t head_dim = 0;
  int64_t rotary_emb_dim = 0;
  double rotary_emb_base = 10000.0;
  bool qkv_proj_bias = true;
  bool out_proj_bias = true;
  bool causal = true;
  double softmax_scale = 0.0;  // 0 means 1/sqrt(head_dim)
  // Falcon-H1: the keys times this factor after their projection.
  float key_multiplier = 1.f;
  // HF's layout: q_proj, k_proj, v_proj, o_proj (biases: qkv_proj_bias,
  // out_proj_bias) instead of one in_proj and out_proj.
  bool split_projections = false;
};

// Zamba2's shared transformer block: RMSNorm of the concatenated input
// [h | embeddings] (2 * d_model), attention over it (head_dim channels per
// head, output d_model), RMSNorm, a GELU-gated MLP (gate_up_proj, first half
// the gate), each projection with a low-rank adapter per use.
struct SharedBlockConfig {
  int64_t d_model = 0;        // D; the block reads 2D channels
  AttentionConfig attention;  // over 2D input channels
  int64_t mlp_hidden = 0;     // F
  int64_t adapter_rank = 0;   // r
  bool attention_adapters = false;  // q, k and v adapters (MLP adapters always)
  float norm_eps = 1e-5f;
};

}  // namespace ssm
