// mamba3_output and its backward on the cpu. Per (row, head, rank):
//   zr = z mimo_z_r,  o' = RMSNorm_P(o_r) norm_h (or o_r),
//   y_h = sum_r o' SiLU(zr) mimo_o_r.
// The forward is parallel over (batch row, head) and allocates nothing (it
// runs on every decode step); the backward is parallel over heads, so that
// each head's parameter gradients sum its rows in a fixed order.
#include <algorithm>
#include <cmath>

#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/mamba3_math.h"
#include "ops/cpu/mamba3_workspace.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/rank_gates.h"
#include "ops/cpu/vec_math.h"
#include "ops/scalar_math.h"

namespace ssm::cpu {

using namespace m3;

namespace {

struct OutputView {
  int64_t B, H, L, R, P;
  const float *o, *z, *mimo_z, *mimo_o, *norm;
  int64_t ld_z;
  float eps;
  explicit OutputView(const ops::Mamba3OutputArgs& a)
      : B(a.o.dim(0)),
        H(a.o.dim(1)),
        L(a.o.dim(2)),
        R(a.rank),
        P(a.o.dim(4)),
        o(a.o.data<float>()),
        z(a.z.data<float>()),
        mimo_z(in_or_null(a.mimo_z)),
        mimo_o(in_or_null(a.mimo_o)),
        norm(in_or_null(a.norm)),
        ld_z(a.z.row_stride()),
        eps(a.norm_eps) {}
  // Offset of row (b, h, t, r) of o, for row = b L + t of z and y.
  int64_t o_at(int64_t row, int64_t h, int64_t r) const {
    return (((row / L * H + h) * L + row % L) * R + r) * P;
  }
};

struct BackwardWorkspace {
  int64_t R, P;
  double *dmz, *dmo, *dnorm, *don;
  void carve(Carver<float>&, Carver<double>& d) {
    dmz = d.take(R * P);
    dmo = d.take(R * P);
    dnorm = d.take(P);
    don = d.take(P);
  }
};

}  // namespace

// Ranks whose norm scales one call of rank_gates takes (a buffer on the
// stack: the forward runs on every decode step and allocates nothing).
constexpr int64_t kRankBatch = 16;

void mamba3_output(Context& ctx, const ops::Mamba3OutputArgs& args) {
  const OutputView a(args);
  float* y_data = out(args.y);
  const int64_t ld_y = args.y.row_stride();
  // Per (batch row, head), its steps in order: o is (B, H, L, R, P), so each
  // head's o is read as one contiguous run. Walking rows, then heads, read
  // R P floats 4 L R P bytes past the last ones, a stride no prefetcher
  // follows, and those loads were most of the gates' samples (perf). A
  // decode step's few heads run on the calling thread.
  parallel_items(ctx.pool(), a.B * a.H, a.L * a.R * a.P, [&](int64_t i0, int64_t i1) {
    const int64_t H = a.H, L = a.L, P = a.P, R = a.R;
    float scale[kRankBatch] = {};
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H;
      for (int64_t row = b * L; row < (b + 1) * L; ++row)
        for (int64_t r0 = 0; r0 < R; r0 += kRankBatch) {
          const int64_t rn = std::min(kRankBatch, R - r0), hr = (h * R + r0) * P;
          const float* o = a.o + a.o_at(row, h, r0);
          if (a.norm)
            for (int64_t r = 0; r < rn; ++r)
              scale[r] = static_cast<float>(inv_rms_vec(o + r * P, P, a.eps));
          const RankGates g{.o = o,
                            .z = a.z + row * a.ld_z + h * P,
                            .mimo_z = a.mimo_z ? a.mimo_z + hr : nullptr,
                            .norm = a.norm ? a.norm + h * P : nullptr,
                            .scale = scale,
                            .mimo_o = a.mimo_o ? a.mimo_o + hr : nullptr};
          rank_gates(g, rn, P, r0 > 0, y_data + row * ld_y + h * P);
        }
    }
  });
}

void mamba3_output_backward(Context& ctx, const ops::Mamba3OutputBackwardArgs& g) {
  const OutputView a(g.fwd);
  const float* dy_data = g.dy.data<float>();
  float *dz_data = out(g.dz), *d_o_data = out(g.d_o);
  float *dmimo_z = out_or_null(g.dmimo_z), *dmimo_o = out_or_null(g.dmimo_o);
  float* dnorm_out = out_or_null(g.dnorm);
  const int64_t ld_dy = g.dy.row_stride(), ld_dz = g.dz.row_stride();
  const Parts parts = split(ctx, a.H);
  const Slots<BackwardWorkspace> slots(ctx, parts, {.R = a.R, .P = a.P});
  for_each_part(ctx, parts, [&](int64_t part, int64_t h0, int64_t h1) {
    const int64_t L = a.L, P = a.P, R = a.R;
    const BackwardWorkspace ws = slots[part];
    double *dmz = ws.dmz, *dmo = ws.dmo, *dnorm = ws.dnorm, *don = ws.don;
    for (int64_t h = h0; h < h1; ++h) {
      std::fill(dmz, dmz + R * P, 0.0);
      std::fill(dmo, dmo + R * P, 0.0);
      std::fill(dnorm, dnorm + P, 0.0);
      const float* w = a.norm ? a.norm + h * P : nullptr;
      for (int64_t row = 0; row < a.B * L; ++row) {
        const float* z = a.z + row * a.ld_z + h * P;
        const float* dy = dy_data + row * ld_dy + h * P;
        float* dz = dz_data + row * ld_dz + h * P;
        std::fill(dz, dz + P, 0.f);
        for (int64_t r = 0; r < R; ++r) {
          const int64_t at = a.o_at(row, h, r), hr = (h * R + r) * P;
          const float* o = a.o + at;
          float* d_o = d_o_data + at;
          const double rinv = w ? inv_rms(o, P, a.eps) : 1.0;
          double dot = 0;  // sum_p o w d(o')
          for (int64_t p = 0; p < P; ++p) {
            const float mz = a.mimo_z ? a.mimo_z[hr + p] : 1.f;
            const float zr = z[p] * mz, sg = ops::silu(zr);
            const double on = w ? o[p] * rinv * w[p] : o[p];
            const double dgated = a.mimo_o ? static_cast<double>(dy[p]) * a.mimo_o[hr + p] : dy[p];
            dmo[r * P + p] += dy[p] * on * sg;
            don[p] = dgated * sg;
            const double dzr = dgated * on * ops::silu_grad(zr);
            dz[p] += static_cast<float>(dzr * mz);
            dmz[r * P + p] += dzr * z[p];
            if (w) {
              dnorm[p] += don[p] * o[p] * rinv;
              dot += static_cast<double>(o[p]) * w[p] * don[p];
            }
          }
          const double c = dot * rinv * rinv * rinv / static_cast<double>(P);
          for (int64_t p = 0; p < P; ++p)
            d_o[p] = static_cast<float>(w ? rinv * w[p] * don[p] - o[p] * c : don[p]);
        }
      }
      for (int64_t k = 0; k < R * P; ++k) {
        if (dmimo_z) dmimo_z[h * R * P + k] += static_cast<float>(dmz[k]);
        if (dmimo_o) dmimo_o[h * R * P + k] += static_cast<float>(dmo[k]);
      }
      if (dnorm_out)
        for (int64_t p = 0; p < P; ++p) dnorm_out[h * P + p] += static_cast<float>(dnorm[p]);
    }
  });
}

}  // namespace ssm::cpu
