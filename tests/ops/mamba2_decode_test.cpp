// mamba2_decode_stack, a decode step through a stack of Mamba-2 layers, on
// every backend against ref's (the ops of each layer's step in turn): h and
// every layer's convolution and scan states after two steps, for the 130m
// layer's shape (one layer), small stacks (batch 1, 3 and 8, N 16 to 128,
// groups, the norm before the gate, no gate norm, biases or none, BF16
// weights) and a stack longer than one launch takes. On cuda it runs the
// kernel once a phase and once for the stack.
#include "ssm/ops/mamba2_decode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/against_ref.h"

namespace ssm {
namespace {

using testing::on;
using testing::random_tensor;

struct StackCase {
  int64_t layers, B, D, H, P, N, G, K;
  int64_t norm_groups;  // 0: no gate norm weight (y * SiLU(z))
  bool norm_before_gate, biases;
  DType weights;
};
const StackCase kCases[] = {
    {1, 1, 768, 24, 64, 128, 1, 4, 1, false, false, DType::kBF16},  // Mamba-2 130m
    {2, 3, 64, 4, 16, 16, 2, 4, 2, true, false, DType::kF32},
    {2, 1, 256, 8, 32, 128, 1, 4, 1, false, true, DType::kF32},
    {2, 8, 128, 4, 16, 64, 1, 3, 0, false, true, DType::kF32},
    {3, 2, 96, 6, 16, 40, 3, 4, 3, false, true, DType::kBF16},
    {34, 1, 32, 2, 16, 16, 1, 2, 1, false, false, DType::kF32},  // two launches of layers
};

// One layer's parameters and states on the host.
struct LayerInputs {
  LayerInputs(const StackCase& s, uint64_t seed) {
    const int64_t HP = s.H * s.P, C = HP + 2 * s.G * s.N, NZ = 2 * HP + 2 * s.G * s.N + s.H;
    norm_weight = random_tensor({s.D}, seed + 1, 0.5f, 1.5f);
    in_proj = random_tensor({NZ, s.D}, seed + 2, -0.1f, 0.1f).to_dtype(s.weights);
    in_bias = random_tensor({NZ}, seed + 3, -0.1f, 0.1f);
    conv_weight = random_tensor({C, 1, s.K}, seed + 4, -0.5f, 0.5f);
    conv_bias = random_tensor({C}, seed + 5);
    dt_bias = random_tensor({s.H}, seed + 6, -3.f, 0.f);
    A_log = random_tensor({s.H}, seed + 7, -1.f, 1.5f);
    D = random_tensor({s.H}, seed + 8);
    gate_norm_weight = random_tensor({HP}, seed + 9, 0.5f, 1.5f);
    out_proj = random_tensor({s.D, HP}, seed + 10, -0.05f, 0.05f).to_dtype(s.weights);
    out_bias = random_tensor({s.D}, seed + 11, -0.1f, 0.1f);
    conv_state = random_tensor({s.B, s.K - 1, C}, seed + 12);
    state = random_tensor({s.B, s.H, s.P, s.N}, seed + 13);
  }
  Tensor norm_weight, in_proj, in_bias, conv_weight, conv_bias, dt_bias, A_log, D, gate_norm_weight,
      out_proj, out_bias, conv_state, state;
};

using Launch = ops::Mamba2DecodeStackArgs::Launch;

// Two steps through the stack on ctx; h and every state afterwards.
testing::Outputs run_stack(Context& ctx, const StackCase& s, const std::vector<LayerInputs>& in,
                           const Tensor& h0, Launch launch) {
  ops::Mamba2DecodeStackArgs a{.groups = s.G,
                               .norm_group = s.norm_groups ? s.H * s.P / s.norm_groups : 0,
                               .norm_before_gate = s.norm_before_gate,
                               .eps = 1e-5f,
                               .gate_eps = 1e-5f,
                               .dt_min = 0.001f,
                               .dt_max = 0.5f,
                               .h = on(ctx, h0),
                               .launch = launch};
  for (const LayerInputs& l : in) {
    auto maybe = [&](const Tensor& t, bool present) { return present ? on(ctx, t) : Tensor(); };
    a.layers.push_back({.norm_weight = on(ctx, l.norm_weight),
                        .in_proj = on(ctx, l.in_proj),
                        .in_bias = maybe(l.in_bias, s.biases),
                        .conv_weight = on(ctx, l.conv_weight),
                        .conv_bias = maybe(l.conv_bias, s.biases),
                        .dt_bias = on(ctx, l.dt_bias),
                        .A_log = on(ctx, l.A_log),
                        .D = on(ctx, l.D),
                        .gate_norm_weight = maybe(l.gate_norm_weight, s.norm_groups > 0),
                        .out_proj = on(ctx, l.out_proj),
                        .out_bias = maybe(l.out_bias, s.biases),
                        .conv_state = on(ctx, l.conv_state),
                        .state = on(ctx, l.state)});
  }
  for (int step = 0; step < 2; ++step) ops::mamba2_decode_stack(ctx, a);
  testing::Outputs out{{"h", testing::host(a.h)}};
  for (size_t i = 0; i < a.layers.size(); ++i) {
    out.emplace_back("conv_state " + std::to_string(i), testing::host(a.layers[i].conv_state));
    out.emplace_back("state " + std::to_string(i), testing::host(a.layers[i].state));
  }
  return out;
}

class Mamba2DecodeStackTest : public ::testing::TestWithParam<std::string> {};

void check_cases(const std::string& backend, Launch launch) {
  for (const StackCase& s : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << "layers " << s.layers << " B " << s.B << " D " << s.D << " H " << s.H << " P "
                 << s.P << " N " << s.N << " G " << s.G);
    std::vector<LayerInputs> in;
    for (int64_t i = 0; i < s.layers; ++i) in.emplace_back(s, 100 * static_cast<uint64_t>(i));
    const Tensor h0 = random_tensor({s.B, 1, s.D}, 7);
    // BF16 projections may round their activations to BF16 (the cpu's
    // vdpbf16ps kernels, 2^-9 of each value; ref multiplies them exactly):
    // held to that rounding through the stack, F32 to F32 accumulation.
    const bool rounded = s.weights == DType::kBF16;
    testing::expect_matches_ref(
        backend, [&](Context& ctx) { return run_stack(ctx, s, in, h0, launch); },
        {.tol = {rounded ? 1e-2 : 1e-5, rounded ? 1e-3 : 1e-6}, .threads = {1}});
  }
}

TEST_P(Mamba2DecodeStackTest, PhasePerLaunchMatchesRef) {
  check_cases(GetParam(), Launch::kPhasePerLaunch);
}

// One launch for the stack, grid barriers between the phases (the CPU
// emulator, which runs blocks one after another, runs it on one block).
TEST_P(Mamba2DecodeStackTest, OneLaunchMatchesRef) { check_cases(GetParam(), Launch::kOneLaunch); }

INSTANTIATE_TEST_SUITE_P(Backends, Mamba2DecodeStackTest,
                         ::testing::ValuesIn(testing::all_backends()), testing::backend_param_name);

}  // namespace
}  // namespace ssm
