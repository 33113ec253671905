// Writes the cases of the WebGPU op tests (webgpu_ops.test.mjs): for every
// forward op the webgpu backend implements, random inputs in several shapes
// (odd sizes, several chunks, carried states, column blocks of wider
// tensors) and what the `ref` backend computes from them. One safetensors
// file per case, `<op>.<n>.safetensors`, holding the inputs ("in.<name>")
// and the outputs ("out.<name>", states after the call included), with the
// op's scalar parameters as JSON in the metadata key "params"; index.json
// lists the files.
//
// Usage: ssm_webgpu_op_cases OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ssm/core/error.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/io/safetensors.h"
#include "ssm/ops/attention.h"
#include "ssm/ops/context.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/linear.h"
#include "ssm/ops/mamba3.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/ssd.h"
#include "support/random.h"

namespace ssm {
namespace {

using testing::random_tensor;

class Writer {
 public:
  explicit Writer(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // Saves one case: tensors named in.* / out.*, params as JSON metadata.
  void save(const std::string& op, const Json& params, const NamedTensors& in,
            const NamedTensors& out) {
    const std::string file = op + "." + std::to_string(count_[op]++) + ".safetensors";
    NamedTensors all;
    for (const auto& [n, t] : in)
      if (t.defined()) all.emplace_back("in." + n, t.clone());
    for (const auto& [n, t] : out)
      if (t.defined()) all.emplace_back("out." + n, t.clone());
    save_safetensors(dir_ / file, all, {{"op", op}, {"params", params.dump()}});
    index_.push_back(file);
  }

  void finish() {
    const std::string text = Json(index_).dump(1);
    write_file_atomically(dir_ / "index.json", [&](FileWriter& w) { w.write(text); });
  }

 private:
  std::filesystem::path dir_;
  std::map<std::string, int> count_;
  std::vector<std::string> index_;
};

uint64_t g_seed = 1;
Tensor rnd(const Shape& s, float lo = -1.f, float hi = 1.f) {
  return random_tensor(s, g_seed++, lo, hi);
}

void linear_cases(Context& ctx, Writer& w) {
  struct C {
    int64_t M, N, K;
    bool bias, acc;
  };
  for (const C& c :
       {C{1, 7, 5, true, false}, C{3, 33, 17, false, true}, C{4, 130, 64, true, true},
        C{37, 50, 64, true, false}, C{20, 300, 129, false, false}, C{64, 48, 16, true, true}}) {
    const Tensor x = rnd({c.M, c.K}), W = rnd({c.N, c.K}), b = c.bias ? rnd({c.N}) : Tensor();
    const Tensor y0 = rnd({c.M, c.N}), y = y0.clone();
    ops::linear(ctx, {.x = x, .W = W, .bias = b, .y = y, .accumulate = c.acc});
    w.save("linear", {{"M", c.M}, {"N", c.N}, {"K", c.K}, {"accumulate", c.acc}},
           {{"x", x}, {"W", W}, {"bias", b}, {"y", y0}}, {{"y", y}});
  }
}

void norm_cases(Context& ctx, Writer& w) {
  for (const auto& [rows, D] : {std::pair<int64_t, int64_t>{1, 64}, {5, 33}, {17, 200}}) {
    const Tensor x = rnd({rows, D}, -2.f, 2.f), wt = rnd({D}),
                 out = Tensor::zeros(DType::kF32, {rows, D});
    ops::rms_norm(ctx, {.x = x, .w = wt, .eps = 1e-5f, .out = out});
    w.save("rms_norm", {{"rows", rows}, {"D", D}, {"eps", 1e-5}}, {{"x", x}, {"w", wt}},
           {{"out", out}});
  }
  struct C {
    int64_t rows, D, group;
    bool nbg, has_w;
  };
  for (const C& c : {C{4, 48, 0, false, true}, C{7, 96, 24, false, true}, C{3, 40, 20, true, true},
                     C{5, 33, 0, false, false}, C{9, 130, 65, false, true}}) {
    const Tensor y = rnd({c.rows, c.D}, -2.f, 2.f), z = rnd({c.rows, c.D}, -3.f, 3.f);
    const Tensor wt = c.has_w ? rnd({c.D}) : Tensor(),
                 out = Tensor::zeros(DType::kF32, {c.rows, c.D});
    ops::gated_rms_norm(ctx, {.y = y,
                              .z = z,
                              .w = wt,
                              .group = c.group,
                              .eps = 1e-5f,
                              .norm_before_gate = c.nbg,
                              .out = out});
    w.save("gated_rms_norm",
           {{"rows", c.rows},
            {"D", c.D},
            {"group", c.group ? c.group : c.D},
            {"norm_before_gate", c.nbg},
            {"eps", 1e-5}},
           {{"y", y}, {"z", z}, {"w", wt}}, {{"out", out}});
  }
}

void conv_cases(Context& ctx, Writer& w) {
  struct C {
    int64_t B, L, C, K;
    bool silu, bias;
  };
  for (const C& c :
       {C{1, 1, 24, 4, true, true}, C{2, 13, 37, 4, true, true}, C{3, 5, 16, 3, false, true},
        C{1, 2, 10, 4, true, false}, C{2, 40, 64, 4, true, true}}) {
    const Tensor in = rnd({c.B, c.L, c.C}), wt = rnd({c.C, 1, c.K}),
                 b = c.bias ? rnd({c.C}) : Tensor();
    const Tensor state0 = rnd({c.B, c.K - 1, c.C}), state = state0.clone();
    const Tensor out = Tensor::zeros(DType::kF32, {c.B, c.L, c.C});
    ops::conv1d(ctx,
                {.in = in, .weight = wt, .bias = b, .state = state, .out = out, .silu = c.silu});
    w.save("conv1d", {{"B", c.B}, {"L", c.L}, {"C", c.C}, {"K", c.K}, {"silu", c.silu}},
           {{"in", in}, {"weight", wt}, {"bias", b}, {"state", state0}},
           {{"out", out}, {"state", state}});
  }
}

void ssd_cases(Context& ctx, Writer& w) {
  for (const auto& [rows, H, lo, hi] :
       {std::tuple<int64_t, int64_t, double, double>{18, 5, 0.0, 1e30}, {1, 8, 0.01, 0.5}}) {
    const Tensor raw = rnd({rows, H}, -6.f, 6.f), bias = rnd({H}), Alog = rnd({H}, -1.f, 2.f);
    const Tensor dt = Tensor::zeros(DType::kF32, {rows, H}), A = Tensor::zeros(DType::kF32, {H});
    const float fmax = hi > 1e29 ? std::numeric_limits<float>::infinity() : static_cast<float>(hi);
    ops::ssd_prepare(ctx, {.dt_raw = raw,
                           .dt_bias = bias,
                           .A_log = Alog,
                           .dt_min = static_cast<float>(lo),
                           .dt_max = fmax,
                           .dt = dt,
                           .A = A});
    w.save("ssd_prepare", {{"rows", rows}, {"H", H}, {"dt_min", lo}, {"dt_max", hi}},
           {{"dt_raw", raw}, {"dt_bias", bias}, {"A_log", Alog}}, {{"dt", dt}, {"A", A}});
  }
  // x, B and C are column blocks of one wide tensor, as in the layer.
  struct C {
    int64_t B, L, H, P, G, N, Q;
    bool D;
  };
  for (const C& c : {C{1, 1, 4, 8, 1, 16, 16, true}, C{2, 1, 6, 4, 2, 8, 4, false},
                     C{2, 13, 4, 8, 2, 16, 4, true}, C{1, 37, 6, 5, 3, 7, 8, true},
                     C{2, 45, 8, 16, 2, 16, 16, false}, C{1, 64, 4, 8, 1, 32, 64, true}}) {
    const int64_t HP = c.H * c.P, GN = c.G * c.N;
    const Tensor xbc = rnd({c.B, c.L, HP + 2 * GN});
    const Tensor dt = rnd({c.B, c.L, c.H}, 0.01f, 0.5f), A = rnd({c.H}, -2.f, -0.1f);
    const Tensor D = c.D ? rnd({c.H}) : Tensor();
    const Tensor state0 = rnd({c.B, c.H, c.P, c.N}), state = state0.clone();
    const Tensor y = Tensor::zeros(DType::kF32, {c.B, c.L, HP});
    ops::ssd_scan(ctx, {.groups = c.G,
                        .chunk = c.Q,
                        .x = xbc.cols(0, HP),
                        .B = xbc.cols(HP, HP + GN),
                        .C = xbc.cols(HP + GN, HP + 2 * GN),
                        .dt = dt,
                        .A = A,
                        .D = D,
                        .y = y,
                        .state = state});
    w.save("ssd_scan",
           {{"B", c.B}, {"L", c.L}, {"H", c.H}, {"P", c.P}, {"G", c.G}, {"N", c.N}, {"Q", c.Q}},
           {{"xbc", xbc}, {"dt", dt}, {"A", A}, {"D", D}, {"state", state0}},
           {{"y", y}, {"state", state}});
  }
}

void mamba3_cases(Context& ctx, Writer& w) {
  // prepare: proj = [x | B | C | ddt | ddA | trap | ang] as one wide tensor.
  struct P3 {
    int64_t B, L, H, G, R, P, N, S;
    bool halves, mimo;
  };
  for (const P3& c :
       {P3{2, 11, 4, 1, 1, 8, 16, 4, false, false}, P3{1, 9, 4, 2, 2, 6, 12, 3, true, true},
        P3{1, 1, 2, 1, 1, 4, 8, 2, false, false}, P3{2, 6, 6, 3, 2, 5, 10, 5, true, true}}) {
    const int64_t HP = c.H * c.P, RGN = c.R * c.G * c.N;
    const int64_t cx = 0, cb = HP, cc = cb + RGN, cdt = cc + RGN, cda = cdt + c.H, ctr = cda + c.H,
                  cang = ctr + c.H, width = cang + c.S;
    const Tensor proj = rnd({c.B, c.L, width}, -2.f, 2.f);
    const Tensor dt_bias = rnd({c.H}, -4.f, -1.f), Bn = rnd({c.N}), Cn = rnd({c.N});
    const Tensor Bb = rnd({c.H, c.R, c.N}), Cb = rnd({c.H, c.R, c.N});
    const Tensor mimo_x = c.mimo ? rnd({c.H, c.R, c.P}) : Tensor();
    const Tensor phase0 = rnd({c.B, c.H, c.S}, -3.f, 3.f), phase = phase0.clone();
    auto z = [](Shape s) { return Tensor::zeros(DType::kF32, s); };
    ops::Mamba3PrepareArgs a{
        .heads = c.H,
        .groups = c.G,
        .rank = c.R,
        .pairs = c.halves ? ops::RotaryPairs::kHalves : ops::RotaryPairs::kAdjacent,
        .A_floor = 1e-4f,
        .norm_eps = 1e-5f,
        .x = proj.cols(cx, cx + HP),
        .B = proj.cols(cb, cb + RGN),
        .C = proj.cols(cc, cc + RGN),
        .ddt = proj.cols(cdt, cdt + c.H),
        .ddA = proj.cols(cda, cda + c.H),
        .trap = proj.cols(ctr, ctr + c.H),
        .ang = proj.cols(cang, cang + c.S),
        .dt_bias = dt_bias,
        .B_norm = Bn,
        .C_norm = Cn,
        .B_bias = Bb,
        .C_bias = Cb,
        .mimo_x = mimo_x,
        .phase = phase,
        .B_normed = z({c.B, c.L, RGN}),
        .C_normed = z({c.B, c.L, RGN}),
        .ang_rate = z({c.B, c.L, c.S}),
        .dt = z({c.B, c.H, c.L}),
        .A = z({c.B, c.H, c.L}),
        .lam = z({c.B, c.H, c.L}),
        .q = z({c.B, c.H, c.L, c.R, c.N}),
        .k = z({c.B, c.H, c.L, c.R, c.N}),
        .v = z({c.B, c.H, c.L, c.R, c.P}),
        .phases = z({c.B, c.H, c.L, c.S})};
    ops::mamba3_prepare(ctx, a);
    w.save("mamba3_prepare",
           {{"B", c.B},
            {"L", c.L},
            {"H", c.H},
            {"G", c.G},
            {"R", c.R},
            {"P", c.P},
            {"N", c.N},
            {"S", c.S},
            {"halves", c.halves},
            {"A_floor", 1e-4},
            {"eps", 1e-5},
            {"cols",
             {{"x", cx},
              {"B", cb},
              {"C", cc},
              {"ddt", cdt},
              {"ddA", cda},
              {"trap", ctr},
              {"ang", cang}}}},
           {{"proj", proj},
            {"dt_bias", dt_bias},
            {"B_norm", Bn},
            {"C_norm", Cn},
            {"B_bias", Bb},
            {"C_bias", Cb},
            {"mimo_x", mimo_x},
            {"phase", phase0}},
           {{"phase", phase},
            {"B_normed", a.B_normed},
            {"C_normed", a.C_normed},
            {"dt", a.dt},
            {"A", a.A},
            {"lam", a.lam},
            {"q", a.q},
            {"k", a.k},
            {"v", a.v}});
  }
  // scan, with a saved state (read and replaced).
  struct S3 {
    int64_t B, H, L, R, P, N, chunk;
    bool D;
  };
  for (const S3& c : {S3{1, 3, 1, 1, 8, 16, 8, true}, S3{2, 2, 1, 2, 4, 6, 4, false},
                      S3{2, 3, 13, 1, 8, 16, 4, true}, S3{1, 2, 9, 2, 6, 12, 6, true},
                      S3{1, 4, 40, 2, 16, 32, 8, false}, S3{2, 2, 33, 1, 5, 7, 64, true}}) {
    const Shape qk{c.B, c.H, c.L, c.R, c.N}, hl{c.B, c.H, c.L};
    const Tensor q = rnd(qk, -0.5f, 0.5f), k = rnd(qk, -0.5f, 0.5f),
                 v = rnd({c.B, c.H, c.L, c.R, c.P});
    const Tensor dt = rnd(hl, 0.01f, 0.8f), A = rnd(hl, -3.f, -0.05f), lam = rnd(hl, 0.05f, 0.95f);
    const Tensor D = c.D ? rnd({c.H}) : Tensor();
    const Tensor ssm0 = rnd({c.B, c.H, c.P, c.N}), kp0 = rnd({c.B, c.H, c.R, c.N}, -0.5f, 0.5f),
                 vp0 = rnd({c.B, c.H, c.R, c.P});
    const Tensor ssm = ssm0.clone(), kp = kp0.clone(), vp = vp0.clone();
    const Tensor o = Tensor::zeros(DType::kF32, {c.B, c.H, c.L, c.R, c.P});
    ops::mamba3_scan(ctx, {.chunk = c.chunk,
                           .q = q,
                           .k = k,
                           .v = v,
                           .dt = dt,
                           .A = A,
                           .lam = lam,
                           .D = D,
                           .o = o,
                           .ssm = ssm,
                           .k_prev = kp,
                           .v_prev = vp});
    w.save("mamba3_scan",
           {{"B", c.B},
            {"H", c.H},
            {"L", c.L},
            {"R", c.R},
            {"P", c.P},
            {"N", c.N},
            {"chunk", c.chunk}},
           {{"q", q},
            {"k", k},
            {"v", v},
            {"dt", dt},
            {"A", A},
            {"lam", lam},
            {"D", D},
            {"ssm", ssm0},
            {"k_prev", kp0},
            {"v_prev", vp0}},
           {{"o", o}, {"ssm", ssm}, {"k_prev", kp}, {"v_prev", vp}});
  }
  // output: z a column block of a wider tensor.
  struct O3 {
    int64_t B, L, H, R, P;
    bool mimo, norm;
  };
  for (const O3& c : {O3{2, 5, 3, 1, 8, false, false}, O3{1, 7, 2, 2, 6, true, true},
                      O3{1, 3, 4, 1, 5, false, true}, O3{2, 4, 2, 3, 4, true, false}}) {
    const int64_t HP = c.H * c.P;
    const Tensor o = rnd({c.B, c.H, c.L, c.R, c.P}), zw = rnd({c.B, c.L, HP + 3}, -3.f, 3.f);
    const Tensor mz = c.mimo ? rnd({c.H, c.R, c.P}) : Tensor(),
                 mo = c.mimo ? rnd({c.H, c.R, c.P}) : Tensor();
    const Tensor nw = c.norm ? rnd({HP}) : Tensor(), y = Tensor::zeros(DType::kF32, {c.B, c.L, HP});
    ops::mamba3_output(ctx, {.rank = c.R,
                             .o = o,
                             .z = zw.cols(3, 3 + HP),
                             .mimo_z = mz,
                             .mimo_o = mo,
                             .norm = nw,
                             .norm_eps = 1e-5f,
                             .y = y});
    w.save("mamba3_output",
           {{"B", c.B},
            {"L", c.L},
            {"H", c.H},
            {"R", c.R},
            {"P", c.P},
            {"z_off", 3},
            {"z_ld", HP + 3},
            {"eps", 1e-5}},
           {{"o", o}, {"z", zw}, {"mimo_z", mz}, {"mimo_o", mo}, {"norm", nw}}, {{"y", y}});
  }
}

void attention_cases(Context& ctx, Writer& w) {
  struct C {
    int64_t B, L, H, Hkv, hd, past, rot;
  };
  for (const C& c : {C{2, 5, 4, 2, 8, 3, 4}, C{1, 1, 2, 2, 16, 6, 0}, C{1, 9, 3, 1, 5, 0, 0},
                     C{2, 1, 4, 1, 8, 20, 8}, C{1, 70, 2, 2, 16, 0, 16}}) {
    const int64_t cap = c.past + c.L, width = c.hd * (c.H + 2 * c.Hkv);
    const Tensor qkv0 = rnd({c.B, c.L, width}), qkv = qkv0.clone();
    const Tensor k0 = rnd({c.B, c.Hkv, cap, c.hd}), v0 = rnd({c.B, c.Hkv, cap, c.hd});
    const Tensor kc = k0.clone(), vc = v0.clone();
    const Tensor inv = ops::rotary_inv_freq(c.rot, 10000.0);
    Tensor past = Tensor::empty(DType::kI64, {c.B});
    for (int64_t b = 0; b < c.B; ++b) past.data<int64_t>()[b] = c.past;
    const float scale = 1.f / std::sqrt(static_cast<float>(c.hd));
    const Tensor out = Tensor::zeros(DType::kF32, {c.B, c.L, c.H * c.hd});
    const ops::AttentionArgs a{.heads = c.H,
                               .kv_heads = c.Hkv,
                               .qkv = qkv,
                               .inv_freq = inv,
                               .k_cache = kc,
                               .v_cache = vc,
                               .past = past,
                               .scale = scale,
                               .out = out};
    ops::attention_append_kv(ctx, a);
    ops::attention(ctx, a);
    w.save("attention",
           {{"B", c.B},
            {"L", c.L},
            {"H", c.H},
            {"Hkv", c.Hkv},
            {"hd", c.hd},
            {"past", c.past},
            {"cap", cap},
            {"rot", c.rot},
            {"scale", scale}},
           {{"qkv", qkv0}, {"k_cache", k0}, {"v_cache", v0}, {"inv_freq", inv}},
           {{"out", out}, {"k_cache", kc}, {"v_cache", vc}});
  }
}

}  // namespace
}  // namespace ssm

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    ssm::Context ctx("ref", 1);
    ssm::Writer w(dir);
    ssm::linear_cases(ctx, w);
    ssm::norm_cases(ctx, w);
    ssm::conv_cases(ctx, w);
    ssm::ssd_cases(ctx, w);
    ssm::mamba3_cases(ctx, w);
    ssm::attention_cases(ctx, w);
    w.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssm_webgpu_op_cases: %s\n", e.what());
    return 1;
  }
  return 0;
}
