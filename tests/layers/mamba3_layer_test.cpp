// The Mamba-3 layer over the configurations no golden covers (SPEC §7):
// MIMO ranks 1, 2, 4, rope_fraction 0.5 and 1.0, ngroups 1 and 2, the output
// norm on and off. Checked against a float64 transcription of SPEC §4 written
// here, chunked against sequential from saved states, step() against
// forward, and WSLA rows.
#include "ssm/layers/mamba3_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "ssm/ops/backend.h"
#include "support/backends.h"
#include "support/compare.h"
#include "support/random.h"

namespace ssm {
namespace {

struct LayerCase {
  bool mimo;
  int64_t rank, groups;
  double rope;
  bool outproj_norm;
  int64_t chunk;
  std::string name;
};
void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

Mamba3Config make_config(const LayerCase& lc) {
  Mamba3Config c;
  c.d_model = 32;
  c.d_state = 16;
  c.headdim = 16;  // d_inner 64, 4 heads
  c.ngroups = lc.groups;
  c.rope_fraction = lc.rope;
  c.is_outproj_norm = lc.outproj_norm;
  c.is_mimo = lc.mimo;
  c.mimo_rank = lc.rank;
  c.chunk_size = lc.chunk;
  return c;
}

void fill_random(Mamba3Layer& layer, uint64_t seed) {
  for (Param& p : layer.parameters()) {
    float lo = -0.3f, hi = 0.3f;  // projections
    if (p.name == "dt_bias") lo = -3.f, hi = -1.f;
    if (p.name.find("bias") != std::string::npos && p.name != "dt_bias") lo = 0.5f, hi = 1.5f;
    if (p.name.find("norm") != std::string::npos) lo = 0.5f, hi = 1.5f;
    if (p.name == "D" || p.name.starts_with("mimo_")) lo = -1.f, hi = 1.f;
    p.value = testing::random_tensor(p.shape, seed++, lo, hi);
  }
}

double silu(double v) { return v / (1 + std::exp(-v)); }

// SPEC §4 token by token in float64, from a fresh state.
std::vector<float> spec_forward(const Mamba3Layer& layer, const Tensor& x) {
  const Mamba3Config& c = layer.config();
  const int64_t B = x.dim(0), L = x.dim(1), Dm = c.d_model, H = c.nheads(), P = c.headdim;
  const int64_t N = c.d_state, G = c.ngroups, R = c.rank(), Sa = c.n_angles(), di = c.d_inner();
  const int64_t RGN = R * G * N, W = c.d_in_proj();
  auto w = [&](const char* name) { return layer.param(name).value.data<float>(); };
  const float* mimo_x = c.is_mimo ? w("mimo_x") : nullptr;
  const float* mimo_z = c.is_mimo ? w("mimo_z") : nullptr;
  const float* mimo_o = c.is_mimo ? w("mimo_o") : nullptr;
  const float* norm = c.is_outproj_norm ? w("norm.weight") : nullptr;
  const float* in_proj = w("in_proj.weight");
  const float* out_proj = w("out_proj.weight");
  auto norm_bias = [&](const double* in, const float* wn, const float* bias, double* out) {
    double ss = 0;
    for (int64_t n = 0; n < N; ++n) ss += in[n] * in[n];
    const double s = 1 / std::sqrt(ss / N + c.norm_eps);
    for (int64_t n = 0; n < N; ++n) out[n] = in[n] * s * wn[n] + bias[n];
  };
  std::vector<float> out(B * L * Dm);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> phase(H * Sa, 0), S(H * P * N, 0), kp(H * R * N, 0), vp(H * R * P, 0);
    for (int64_t t = 0; t < L; ++t) {
      const float* u = x.data<float>() + (b * L + t) * Dm;
      std::vector<double> proj(W, 0), y(di, 0);
      for (int64_t j = 0; j < W; ++j)
        for (int64_t d = 0; d < Dm; ++d) proj[j] += u[d] * static_cast<double>(in_proj[j * Dm + d]);
      const double *z = proj.data(), *xs = z + di, *Bs = xs + di, *Cs = Bs + RGN, *ddt = Cs + RGN;
      const double *ddA = ddt + H, *trap = ddA + H, *ang = trap + H;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / G);
        const double dt = std::log1p(std::exp(ddt[h] + w("dt_bias")[h]));
        const double f = ddA[h] >= 0 ? 1 + ddA[h] : 1 / (1 - ddA[h]);
        const double A = std::min(-f, -c.A_floor), lam = 1 / (1 + std::exp(-trap[h]));
        for (int64_t j = 0; j < Sa; ++j)
          phase[h * Sa + j] += std::numbers::pi * std::tanh(ang[j]) * dt;
        std::vector<double> q(R * N), k(R * N), v(R * P);
        for (int64_t r = 0; r < R; ++r) {
          norm_bias(Cs + (r * G + g) * N, w("C_norm.weight"), w("C_bias") + (h * R + r) * N,
                    &q[r * N]);
          norm_bias(Bs + (r * G + g) * N, w("B_norm.weight"), w("B_bias") + (h * R + r) * N,
                    &k[r * N]);
          for (int64_t j = 0; j < Sa; ++j) {
            const int64_t i0 = c.is_mimo ? j : 2 * j, i1 = c.is_mimo ? j + N / 2 : 2 * j + 1;
            const double cs = std::cos(phase[h * Sa + j]), sn = std::sin(phase[h * Sa + j]);
            for (double* e : {&q[r * N], &k[r * N]}) {
              const double a0 = e[i0], a1 = e[i1];
              e[i0] = a0 * cs - a1 * sn;
              e[i1] = a0 * sn + a1 * cs;
            }
          }
          for (int64_t p = 0; p < P; ++p)
            v[r * P + p] = xs[h * P + p] * (mimo_x ? mimo_x[(h * R + r) * P + p] : 1.f);
        }
        const double alpha = std::exp(A * dt), beta = (1 - lam) * dt * alpha, gamma = lam * dt;
        double* Sh = &S[h * P * N];
        for (int64_t p = 0; p < P; ++p)
          for (int64_t n = 0; n < N; ++n) {
            double acc = alpha * Sh[p * N + n];
            for (int64_t r = 0; r < R; ++r)
              acc += beta * vp[(h * R + r) * P + p] * kp[(h * R + r) * N + n] +
                     gamma * v[r * P + p] * k[r * N + n];
            Sh[p * N + n] = acc;
          }
        for (int64_t r = 0; r < R; ++r) {
          std::vector<double> o(P);
          double ss = 0;
          for (int64_t p = 0; p < P; ++p) {
            o[p] = w("D")[h] * v[r * P + p];
            for (int64_t n = 0; n < N; ++n) o[p] += Sh[p * N + n] * q[r * N + n];
            ss += o[p] * o[p];
          }
          for (int64_t p = 0; p < P; ++p) {
            const int64_t hr = (h * R + r) * P + p;
            double val = o[p];
            if (norm) val = val / std::sqrt(ss / P + c.norm_eps) * norm[h * P + p];
            val *= silu(z[h * P + p] * (mimo_z ? mimo_z[hr] : 1.f));
            y[h * P + p] += val * (mimo_o ? mimo_o[hr] : 1.f);
          }
        }
        std::copy(k.begin(), k.end(), kp.begin() + h * R * N);
        std::copy(v.begin(), v.end(), vp.begin() + h * R * P);
      }
      for (int64_t d = 0; d < Dm; ++d) {
        double acc = 0;
        for (int64_t i = 0; i < di; ++i) acc += y[i] * out_proj[d * di + i];
        out[(b * L + t) * Dm + d] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

Tensor time_slice(const Tensor& x, int64_t t0, int64_t t1) {
  const int64_t B = x.dim(0), L = x.dim(1), D = x.dim(2);
  Tensor out = Tensor::empty(DType::kF32, {B, t1 - t0, D});
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(x.data<float>() + (b * L + t0) * D, (t1 - t0) * D,
                out.data<float>() + b * (t1 - t0) * D);
  return out;
}

std::unique_ptr<LayerState> clone_state(const SequenceLayer& layer, LayerState& st, int64_t batch) {
  auto out = layer.make_state(batch);
  auto dst = out->tensors();
  auto src = st.tensors();
  for (size_t i = 0; i < dst.size(); ++i)
    std::memcpy(dst[i].second->raw(), src[i].second->raw(), src[i].second->nbytes());
  return out;
}

class Mamba3LayerCases : public ::testing::TestWithParam<LayerCase> {};

TEST_P(Mamba3LayerCases, MatchesFloat64Spec) {
  Mamba3Layer layer(make_config(GetParam()));
  fill_random(layer, 100);
  const Tensor x = testing::random_tensor({2, 21, 32}, 5);
  const std::vector<float> want = spec_forward(layer, x);
  for (const std::string& backend : testing::all_backends()) {
    Tensor y = Tensor::empty(DType::kF32, x.shape());
    Context ctx(backend, 2);
    layer.forward(x, y, nullptr, ctx);
    EXPECT_LE(testing::max_rel_error(y.data<float>(), want.data(), y.numel()), 2e-5) << backend;
  }
}

TEST_P(Mamba3LayerCases, ChunkedEqualsSequentialFromASavedState) {
  const Mamba3Config c = make_config(GetParam());
  Mamba3Layer layer(c);
  fill_random(layer, 200);
  Mamba3Layer& chunked = layer;
  Mamba3Layer& sequential = layer;
  const int64_t B = 2, L0 = 6, L = 29;  // neither a multiple of any chunk here
  const Tensor x = testing::random_tensor({B, L0 + L, c.d_model}, 9);
  const std::vector<float> want_all = spec_forward(chunked, x);

  Context one("ref", 1);
  auto saved = sequential.make_state(B);
  Tensor y0 = Tensor::empty(DType::kF32, {B, L0, c.d_model});
  sequential.forward(time_slice(x, 0, L0), y0, saved.get(), one);
  const Tensor x1 = time_slice(x, L0, L0 + L);
  Tensor want = Tensor::empty(DType::kF32, {B, L, c.d_model});
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(want_all.data() + (b * (L0 + L) + L0) * c.d_model, L * c.d_model,
                want.data<float>() + b * L * c.d_model);

  auto st_ref = clone_state(sequential, *saved, B);
  Tensor y_ref = Tensor::empty(DType::kF32, x1.shape());
  sequential.forward(x1, y_ref, st_ref.get(), one);
  EXPECT_LE(testing::max_rel_error(y_ref, want), 2e-5);
  for (const auto& [backend, threads] : {std::pair<std::string, int>{"cpu", 1}, {"cpu", 2}, {"ref", 2}}) {
    Context ctx(backend, threads);
    auto st = clone_state(chunked, *saved, B);
    Tensor y = Tensor::empty(DType::kF32, x1.shape());
    chunked.forward(x1, y, st.get(), ctx);
    EXPECT_LE(testing::max_rel_error(y, y_ref), 2e-5) << threads << " threads";
    EXPECT_LE(testing::max_rel_error(y, want), 2e-5) << threads << " threads";
    auto got = st->tensors(), ref = st_ref->tensors();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(testing::max_rel_error(*got[i].second, *ref[i].second), 2e-5) << got[i].first;
  }
}

TEST_P(Mamba3LayerCases, StepEqualsForward) {
  const Mamba3Config c = make_config(GetParam());
  Mamba3Layer layer(c);
  fill_random(layer, 300);
  const int64_t B = 3, L = 13;
  const Tensor x = testing::random_tensor({B, L, c.d_model}, 11);
  for (const std::string& backend : testing::all_backends()) {
  SCOPED_TRACE(backend);
  Context ctx(backend, 2);
  auto st_fwd = layer.make_state(B);
  Tensor y_fwd = Tensor::empty(DType::kF32, x.shape());
  layer.forward(x, y_fwd, st_fwd.get(), ctx);

  auto st = layer.make_state(B);
  Tensor xt = Tensor::empty(DType::kF32, {B, c.d_model}),
         yt = Tensor::empty(DType::kF32, {B, c.d_model});
  Tensor y = Tensor::empty(DType::kF32, x.shape());
  for (int64_t t = 0; t < L; ++t) {
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(x.data<float>() + (b * L + t) * c.d_model, c.d_model,
                  xt.data<float>() + b * c.d_model);
    layer.step(xt, yt, *st, ctx);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(yt.data<float>() + b * c.d_model, c.d_model,
                  y.data<float>() + (b * L + t) * c.d_model);
  }
  EXPECT_LE(testing::max_rel_error(y, y_fwd), 2e-5);
  auto a = st->tensors(), r = st_fwd->tensors();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(testing::max_rel_error(*a[i].second, *r[i].second), 2e-5) << a[i].first;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, Mamba3LayerCases,
    ::testing::Values(LayerCase{false, 1, 1, 0.5, false, 8, "siso_rope50_g1"},
                      LayerCase{false, 1, 2, 1.0, true, 8, "siso_rope100_g2_norm"},
                      LayerCase{false, 1, 1, 0.25, true, 5, "siso_rope25_chunk5_norm"},
                      LayerCase{true, 1, 2, 0.5, true, 8, "mimo_r1_rope50_g2_norm"},
                      LayerCase{true, 2, 1, 1.0, false, 8, "mimo_r2_rope100_g1"},
                      LayerCase{true, 2, 2, 0.5, true, 6, "mimo_r2_rope50_g2_norm"},
                      LayerCase{true, 4, 2, 1.0, false, 8, "mimo_r4_rope100_g2"},
                      LayerCase{true, 4, 1, 0.5, true, 16, "mimo_r4_rope50_g1_norm"}),
    [](const auto& info) { return info.param.name; });

// Inputs longer than the layer's segment go through in parts, the state
// carried between them.
TEST(Mamba3Layer, LongInputsMatchTheSpecAcrossSegments) {
  Mamba3Layer layer(make_config({true, 2, 2, 0.5, true, 8, ""}));
  fill_random(layer, 400);
  Context ctx("cpu", 2);  // ref takes the same path: segmenting is the layer's
  for (auto [B, L] : {std::pair<int64_t, int64_t>{1, 600}, {3, 200}}) {
    const Tensor x = testing::random_tensor({B, L, 32}, 12);
    const std::vector<float> want = spec_forward(layer, x);
    Tensor y = Tensor::empty(DType::kF32, x.shape());
    layer.forward(x, y, nullptr, ctx);
    EXPECT_LE(testing::max_rel_error(y.data<float>(), want.data(), y.numel()), 2e-5)
        << B << "x" << L;
  }
}

// The cpu's kernels under another backend's segment length: 0 (whole
// sequences, as a device backend asks) or a short one. The layer's output
// is the spec's either way.
class CpuWithSegment : public Backend {
 public:
  explicit CpuWithSegment(int64_t rows) : rows_(rows) {}
  std::string_view name() const override { return "cpu"; }
  Device device() const override { return Device::host(); }
  const OpTable& ops() const override { return find_backend("cpu").ops(); }
  int64_t sequence_segment_rows() const override { return rows_; }

 private:
  int64_t rows_;
};

TEST(Mamba3Layer, TheBackendsSegmentLengthLeavesTheOutput) {
  Mamba3Layer layer(make_config({true, 2, 2, 0.5, true, 8, ""}));
  fill_random(layer, 401);
  const Tensor x = testing::random_tensor({3, 200, 32}, 13);
  const std::vector<float> want = spec_forward(layer, x);
  for (int64_t rows : {0, 40}) {
    const CpuWithSegment backend(rows);
    Context ctx(backend, 2);
    Tensor y = Tensor::empty(DType::kF32, x.shape());
    layer.forward(x, y, nullptr, ctx);
    EXPECT_LE(testing::max_rel_error(y.data<float>(), want.data(), y.numel()), 2e-5) << rows;
  }
}

TEST(Mamba3Layer, WslaTrainsOnlyTheBcRowsOfInProj) {
  LayerCase lc{true, 2, 2, 0.5, false, 8, ""};
  Mamba3Layer layer(make_config(lc));
  EXPECT_EQ(layer.trainable_parameters().size(), layer.parameters().size());
  layer.set_wsla(true);
  const auto slices = layer.trainable_parameters();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].param->name, "in_proj.weight");
  EXPECT_EQ(slices[0].row_begin, 2 * 64);                 // 2 d_inner
  EXPECT_EQ(slices[0].row_end, 2 * 64 + 2 * 2 * 2 * 16);  // + 2 R G N
}

TEST(Mamba3Layer, ParameterShapesFollowTheConfig) {
  LayerCase lc{true, 4, 2, 1.0, true, 8, ""};
  Mamba3Layer layer(make_config(lc));
  // 2*64 + 2*4*2*16 + 3*4 + 16/2 angles
  EXPECT_EQ(layer.param("in_proj.weight").shape, (Shape{2 * 64 + 256 + 12 + 8, 32}));
  EXPECT_EQ(layer.param("mimo_x").shape, (Shape{4, 4, 16}));
  EXPECT_EQ(layer.param("B_bias").shape, (Shape{4, 4, 16}));
  EXPECT_EQ(layer.param("norm.weight").shape, (Shape{64}));
  auto st = layer.make_state(3);
  auto& s = static_cast<Mamba3State&>(*st);
  EXPECT_EQ(s.phase.shape(), (Shape{3, 4, 8}));
  EXPECT_EQ(s.ssm.shape(), (Shape{3, 4, 16, 16}));
  EXPECT_EQ(s.k_prev.shape(), (Shape{3, 4, 4, 16}));
  EXPECT_EQ(s.v_prev.shape(), (Shape{3, 4, 4, 16}));
}

}  // namespace
}  // namespace ssm
