// backward_mamba3 against centred differences in float64 of a float64
// transcription of SPEC §4 (token by token, independent of the engine's
// ops), J = sum(w * y), over every coordinate of every parameter and of the
// input: SISO and MIMO R=2, rope_fraction 0.5 and 1.0, ngroups 1 and 2, the
// output norm on and off, the A floor active, several chunks; 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>

#include "fd.h"
#include "ssm/layers/mamba3_layer.h"
#include "support/backends.h"
#include "support/layer_backward.h"
#include "support/random.h"

namespace ssm {
namespace {

using testing::fd_gradient;
using testing::random_doubles;
using testing::rel_error;
using testing::to_float;

double silu(double v) { return v / (1 + std::exp(-v)); }

// The layer in float64, parameters by name.
struct Reference {
  Mamba3Config c;
  std::map<std::string, std::vector<double>> p;

  const std::vector<double>* opt(const std::string& name) const {
    const auto it = p.find(name);
    return it == p.end() ? nullptr : &it->second;
  }

  double J(const std::vector<double>& u, const std::vector<double>& w, int64_t B, int64_t L) const {
    const int64_t D = c.d_model, H = c.nheads(), P = c.headdim, N = c.d_state, G = c.ngroups;
    const int64_t R = c.rank(), d_inner = c.d_inner(), width = c.d_in_proj(), S = c.n_angles();
    const int64_t RGN = R * G * N, off_dt = 2 * d_inner + 2 * RGN;
    const auto& in_w = p.at("in_proj.weight");
    const auto& out_w = p.at("out_proj.weight");
    const auto *mx = opt("mimo_x"), *mz = opt("mimo_z"), *mo = opt("mimo_o"), *nw = opt("norm.weight");
    double total = 0;
    std::vector<double> proj(width), y(d_inner), q(N), k(N), o(P);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> Sst(H * P * N, 0.0), kprev(H * R * N, 0.0), vprev(H * R * P, 0.0);
      std::vector<double> phase(H * S, 0.0);
      for (int64_t t = 0; t < L; ++t) {
        const double* ut = u.data() + (b * L + t) * D;
        for (int64_t i = 0; i < width; ++i) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += in_w[i * D + d] * ut[d];
          proj[i] = s;
        }
        std::fill(y.begin(), y.end(), 0.0);
        for (int64_t h = 0; h < H; ++h) {
          const int64_t g = h / (H / G);
          const double dt = std::log1p(std::exp(proj[off_dt + h] + p.at("dt_bias")[h]));
          const double va = proj[off_dt + H + h];
          const double A = std::min(-(va >= 0 ? 1 + va : 1 / (1 - va)), -c.A_floor);
          const double lam = 1 / (1 + std::exp(-proj[off_dt + 2 * H + h]));
          const double alpha = std::exp(A * dt), beta = (1 - lam) * dt * alpha, gamma = lam * dt;
          for (int64_t j = 0; j < S; ++j)
            phase[h * S + j] += std::numbers::pi * std::tanh(proj[off_dt + 3 * H + j]) * dt;
          std::vector<double> kt(R * N), qt(R * N), vt(R * P);
          for (int64_t r = 0; r < R; ++r) {
            for (int which = 0; which < 2; ++which) {
              const double* src = proj.data() + 2 * d_inner + which * RGN + (r * G + g) * N;
              const auto& nwt = p.at(which ? "C_norm.weight" : "B_norm.weight");
              const auto& bias = p.at(which ? "C_bias" : "B_bias");
              double ss = 0;
              for (int64_t n = 0; n < N; ++n) ss += src[n] * src[n];
              const double rs = 1 / std::sqrt(ss / N + 1e-5);
              double* dst = (which ? qt.data() : kt.data()) + r * N;
              for (int64_t n = 0; n < N; ++n) dst[n] = src[n] * rs * nwt[n] + bias[(h * R + r) * N + n];
              for (int64_t j = 0; j < S; ++j) {
                const int64_t i0 = c.is_mimo ? j : 2 * j, i1 = c.is_mimo ? j + N / 2 : 2 * j + 1;
                const double a0 = dst[i0], a1 = dst[i1], ph = phase[h * S + j];
                dst[i0] = a0 * std::cos(ph) - a1 * std::sin(ph);
                dst[i1] = a0 * std::sin(ph) + a1 * std::cos(ph);
              }
            }
            for (int64_t pp = 0; pp < P; ++pp)
              vt[r * P + pp] = proj[d_inner + h * P + pp] * (mx ? (*mx)[(h * R + r) * P + pp] : 1.0);
          }
          double* St = Sst.data() + h * P * N;
          for (int64_t pp = 0; pp < P; ++pp)
            for (int64_t n = 0; n < N; ++n) {
              double s = alpha * St[pp * N + n];
              for (int64_t r = 0; r < R; ++r)
                s += beta * vprev[(h * R + r) * P + pp] * kprev[(h * R + r) * N + n] +
                     gamma * vt[r * P + pp] * kt[r * N + n];
              St[pp * N + n] = s;
            }
          for (int64_t r = 0; r < R; ++r) {
            for (int64_t pp = 0; pp < P; ++pp) {
              double s = p.at("D")[h] * vt[r * P + pp];
              for (int64_t n = 0; n < N; ++n) s += St[pp * N + n] * qt[r * N + n];
              o[pp] = s;
            }
            double ss = 0;
            for (double x : o) ss += x * x;
            const double rs = 1 / std::sqrt(ss / P + 1e-5);
            for (int64_t pp = 0; pp < P; ++pp) {
              const int64_t hr = (h * R + r) * P + pp;
              const double zr = proj[h * P + pp] * (mz ? (*mz)[hr] : 1.0);
              const double on = nw ? o[pp] * rs * (*nw)[h * P + pp] : o[pp];
              y[h * P + pp] += on * silu(zr) * (mo ? (*mo)[hr] : 1.0);
            }
          }
          std::copy(kt.begin(), kt.end(), kprev.begin() + h * R * N);
          std::copy(vt.begin(), vt.end(), vprev.begin() + h * R * P);
        }
        for (int64_t d = 0; d < D; ++d) {
          double s = 0;
          for (int64_t i = 0; i < d_inner; ++i) s += out_w[d * d_inner + i] * y[i];
          total += w[(b * L + t) * D + d] * s;
        }
      }
    }
    return total;
  }
};

struct Variant {
  const char* name;
  bool mimo;
  int64_t groups;
  double rope;
  bool outproj_norm;
  double A_floor;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class Mamba3LayerBackward : public ::testing::TestWithParam<Variant> {};

TEST_P(Mamba3LayerBackward, MatchesFloat64FiniteDifferences) {
  const Variant var = GetParam();
  Mamba3Config c{.d_model = 8, .d_state = 8, .expand = 2, .headdim = 4, .ngroups = var.groups,
                 .rope_fraction = var.rope, .A_floor = var.A_floor,
                 .is_outproj_norm = var.outproj_norm, .is_mimo = var.mimo, .mimo_rank = 2,
                 .chunk_size = 4};
  Mamba3Layer layer(c);
  Reference ref{.c = c};
  uint64_t seed = 800;
  for (const Param& p : layer.parameters()) {
    float lo = -0.5f, hi = 0.5f;
    if (p.name == "dt_bias") lo = -1.5f, hi = 0.f;
    if (p.name.find("norm") != std::string::npos) lo = 0.5f, hi = 1.5f;
    if (p.name == "D" || p.name.starts_with("mimo_") || p.name.ends_with("_bias")) lo = -1.f, hi = 1.f;
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    ref.p[p.name] = random_doubles(n, seed++, lo, hi);
  }
  const int64_t B = 2, L = 7, D = c.d_model;
  auto u = random_doubles(B * L * D, 1, -2.f, 2.f);
  const auto w = random_doubles(B * L * D, 2);
  auto J = [&] { return ref.J(u, w, B, L); };

  std::vector<std::vector<double>> expected;
  for (const Param& p : layer.parameters()) expected.push_back(fd_gradient(ref.p[p.name], J));
  const auto gu = fd_gradient(u, J);

  for (Param& p : layer.parameters()) {
    const auto v = to_float(ref.p[p.name]);
    p.value = Tensor::empty(DType::kF32, p.shape);
    std::copy(v.begin(), v.end(), p.value.data<float>());
  }
  Tensor x = Tensor::empty(DType::kF32, {B, L, D}), dy = x.clone(), dx = x.clone();
  const auto uf = to_float(u), wf = to_float(w);
  std::copy(uf.begin(), uf.end(), x.data<float>());
  std::copy(wf.begin(), wf.end(), dy.data<float>());
  for (const auto& [backend, threads] : testing::backend_runs()) {
    Context ctx(backend, threads);
    std::vector<Tensor> grads;
    for (const Param& p : layer.parameters()) grads.push_back(Tensor::zeros(DType::kF32, p.shape));
    testing::run_layer_backward(layer, x, dy, dx, grads, ctx);
    auto as_vector = [](const Tensor& t) {
      return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    };
    EXPECT_LE(rel_error(as_vector(dx), gu), 2e-4) << "dx, " << backend << " " << threads << " threads";
    for (size_t i = 0; i < grads.size(); ++i)
      EXPECT_LE(rel_error(as_vector(grads[i]), expected[i]), 2e-4)
          << layer.parameters()[i].name << ", " << backend << " " << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, Mamba3LayerBackward,
    ::testing::Values(Variant{"siso", false, 1, 0.5, false, 1e-4},
                      Variant{"siso_rope1_groups2_norm", false, 2, 1.0, true, 1e-4},
                      Variant{"siso_floor", false, 1, 0.5, false, 0.8},
                      Variant{"mimo", true, 1, 0.5, false, 1e-4},
                      Variant{"mimo_rope1_groups2_norm", true, 2, 1.0, true, 0.8}),
    [](const auto& info) { return std::string(info.param.name); });

// max |a - b| / max |b| of two float tensors of one shape.
double max_rel_diff(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::abs(double(b.data<float>()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(Mamba3LayerBackward, GradientsDoNotDependOnTheThreadCount) {
  // The backward's own sums run in a fixed order (per head, per fixed block
  // of rows); what remains is the forward ops' fp32 rounding.
  Mamba3Config c{.d_model = 32, .d_state = 16, .headdim = 8, .ngroups = 2, .rope_fraction = 1.0,
                 .is_outproj_norm = true, .is_mimo = true, .mimo_rank = 2, .chunk_size = 16};
  Mamba3Layer layer(c);
  uint64_t seed = 1000;
  for (Param& p : layer.parameters())
    p.value = testing::random_tensor(p.shape, seed++, p.shape.size() == 1 ? 0.5f : -0.3f,
                                     p.shape.size() == 1 ? 1.5f : 0.3f);
  const Tensor x = testing::random_tensor({3, 45, c.d_model}, 1);
  const Tensor dy = testing::random_tensor({3, 45, c.d_model}, 2);
  std::vector<std::vector<Tensor>> grads(2);
  std::vector<Tensor> dx(2);
  for (int k = 0; k < 2; ++k) {
    Context ctx(k + 1);
    dx[k] = x.clone();
    for (const Param& p : layer.parameters()) grads[k].push_back(Tensor::zeros(DType::kF32, p.shape));
    testing::run_layer_backward(layer, x, dy, dx[k], grads[k], ctx);
  }
  EXPECT_LE(max_rel_diff(dx[0], dx[1]), 1e-5) << "dx";
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_LE(max_rel_diff(grads[0][i], grads[1][i]), 1e-5) << layer.parameters()[i].name;
}

}  // namespace
}  // namespace ssm
