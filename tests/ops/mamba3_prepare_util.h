// Inputs of the Mamba-3 prepare op as a layer passes them: column blocks of
// one in_proj output [z | x | B | C | ddt | ddA | trap | ang | pad], plus
// the parameters and a random starting phase.
#pragma once

#include "ops/mamba3_test_util.h"

namespace ssm::testing::m3 {

struct PrepCase {
  int64_t B, L, H, P, N, G, R, S;
  bool mimo;  // MIMO: halves rotary pairs and mimo_x; SISO: adjacent pairs, v = x
};
inline std::ostream& operator<<(std::ostream& os, const PrepCase& c) {
  return os << "B" << c.B << " L" << c.L << " H" << c.H << " P" << c.P << " N" << c.N << " G" << c.G
            << " R" << c.R << " S" << c.S << (c.mimo ? " MIMO" : " SISO");
}

// A, in the tests, is floored at 0.5: active where ddA < -1 (a quarter of steps).
inline constexpr float kTestFloor = 0.5f;

struct PrepLayout {
  int64_t x, B, C, ddt, ddA, trap, ang, width;
  explicit PrepLayout(const PrepCase& c) {
    const int64_t HP = c.H * c.P, RGN = c.R * c.G * c.N;
    x = HP;
    B = x + HP;
    C = B + RGN;
    ddt = C + RGN;
    ddA = ddt + c.H;
    trap = ddA + c.H;
    ang = trap + c.H;
    width = ang + c.S + 3;  // padding columns: the blocks are strided views
  }
  // The column blocks x, B, C, ddt, ddA, trap, ang of an in_proj-wide tensor.
  struct Blocks {
    Tensor x, B, C, ddt, ddA, trap, ang;
  };
  Blocks blocks(const Tensor& proj) const {
    return {proj.cols(x, B),          proj.cols(B, C),      proj.cols(C, ddt),
            proj.cols(ddt, ddA),      proj.cols(ddA, trap), proj.cols(trap, ang),
            proj.cols(ang, width - 3)};
  }
};

// Host F32 values of every input.
struct PrepInputs {
  Tensor proj, dt_bias, B_norm, C_norm, B_bias, C_bias, mimo_x, phase;
  PrepInputs(const PrepCase& c, uint64_t seed) {
    proj = random_tensor({c.B, c.L, PrepLayout(c).width}, seed, -2.f, 2.f);
    dt_bias = random_tensor({c.H}, seed + 1, -1.f, 0.5f);
    B_norm = random_tensor({c.N}, seed + 2, 0.5f, 1.5f);
    C_norm = random_tensor({c.N}, seed + 3, 0.5f, 1.5f);
    B_bias = random_tensor({c.H, c.R, c.N}, seed + 4);
    C_bias = random_tensor({c.H, c.R, c.N}, seed + 5);
    mimo_x = maybe_random(c.mimo, {c.H, c.R, c.P}, seed + 6);
    phase = random_tensor({c.B, c.H, c.S}, seed + 7, -3.f, 3.f);
  }
};

// Arguments at a place, outputs NaN; the in_proj segments are column blocks
// of one tensor.
inline ops::Mamba3PrepareArgs prepare_args(const PrepCase& c, const PrepInputs& in, const Place& pl,
                                           bool keep_phases = true) {
  const PrepLayout::Blocks b = PrepLayout(c).blocks(pl.put(in.proj));
  const int64_t RGN = c.R * c.G * c.N;
  const Shape hl{c.B, c.H, c.L}, qk{c.B, c.H, c.L, c.R, c.N};
  return {.heads = c.H,
          .groups = c.G,
          .rank = c.R,
          .pairs = c.mimo ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
          .A_floor = kTestFloor,
          .x = b.x,
          .B = b.B,
          .C = b.C,
          .ddt = b.ddt,
          .ddA = b.ddA,
          .trap = b.trap,
          .ang = b.ang,
          .dt_bias = pl.put(in.dt_bias),
          .B_norm = pl.put(in.B_norm),
          .C_norm = pl.put(in.C_norm),
          .B_bias = pl.put(in.B_bias),
          .C_bias = pl.put(in.C_bias),
          .mimo_x = pl.put(in.mimo_x),
          .phase = pl.put(in.phase),
          .B_normed = pl.nan({c.B, c.L, RGN}),
          .C_normed = pl.nan({c.B, c.L, RGN}),
          .ang_rate = pl.nan({c.B, c.L, c.S}),
          .dt = pl.nan(hl),
          .A = pl.nan(hl),
          .lam = pl.nan(hl),
          .q = pl.nan(qk),
          .k = pl.nan(qk),
          .v = pl.nan({c.B, c.H, c.L, c.R, c.P}),
          .phases = keep_phases ? pl.nan({c.B, c.H, c.L, c.S}) : Tensor()};
}

// Host F32 gradients of the prepare outputs, and starting values of the
// parameter gradients (which the backward adds to).
struct PrepGrads {
  Tensor dq, dk, dv, ddt, dA, dlam;
  Tensor ddt_bias, dB_norm, dC_norm, dB_bias, dC_bias, dmimo_x;
  PrepGrads(const PrepCase& c, uint64_t seed, bool zero_params = false) {
    const Shape qk{c.B, c.H, c.L, c.R, c.N}, hl{c.B, c.H, c.L};
    dq = random_tensor(qk, seed);
    dk = random_tensor(qk, seed + 1);
    dv = random_tensor({c.B, c.H, c.L, c.R, c.P}, seed + 2);
    ddt = random_tensor(hl, seed + 3);
    dA = random_tensor(hl, seed + 4);
    dlam = random_tensor(hl, seed + 5);
    auto param = [&](const Shape& shape, uint64_t sd) {
      return zero_params ? Tensor::zeros(DType::kF32, shape) : random_tensor(shape, sd);
    };
    ddt_bias = param({c.H}, seed + 6);
    dB_norm = param({c.N}, seed + 7);
    dC_norm = param({c.N}, seed + 8);
    dB_bias = param({c.H, c.R, c.N}, seed + 9);
    dC_bias = param({c.H, c.R, c.N}, seed + 10);
    if (c.mimo) dmimo_x = param({c.H, c.R, c.P}, seed + 11);
  }
};

// The backward's arguments at a place: the in_proj gradient blocks are views
// of one NaN tensor as wide as the in_proj output.
inline ops::Mamba3PrepareBackwardArgs prepare_backward_args(const PrepCase& c,
                                                            const ops::Mamba3PrepareArgs& fwd,
                                                            const PrepGrads& gr, const Place& pl) {
  const PrepLayout o(c);
  const PrepLayout::Blocks b = o.blocks(pl.nan({c.B, c.L, o.width}));
  return {.fwd = fwd,
          .dq = pl.put(gr.dq),
          .dk = pl.put(gr.dk),
          .dv = pl.put(gr.dv),
          .ddt = pl.put(gr.ddt),
          .dA = pl.put(gr.dA),
          .dlam = pl.put(gr.dlam),
          .dx = b.x,
          .dB = b.B,
          .dC = b.C,
          .dddt = b.ddt,
          .dddA = b.ddA,
          .dtrap = b.trap,
          .dang = b.ang,
          .ddt_bias = pl.put(gr.ddt_bias),
          .dB_norm = pl.put(gr.dB_norm),
          .dC_norm = pl.put(gr.dC_norm),
          .dB_bias = pl.put(gr.dB_bias),
          .dC_bias = pl.put(gr.dC_bias),
          .dmimo_x = pl.put(gr.dmimo_x)};
}

}  // namespace ssm::testing::m3
