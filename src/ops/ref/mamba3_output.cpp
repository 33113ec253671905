// mamba3_output and its backward, the reference, in double. Per (row, head,
// rank): zr = z mimo_z_r, o' = RMSNorm_P(o_r) norm_h (or o_r),
// y_h = sum_r o' SiLU(zr) mimo_o_r.
#include <vector>

#include "ops/ref/mamba3_ref.h"
#include "ops/scalar_math.h"

namespace ssm::ref {

using namespace m3;

namespace {

struct OutputDims {
  int64_t B, H, L, R, P;
  explicit OutputDims(const ops::Mamba3OutputArgs& a)
      : B(a.o.dim(0)), H(a.o.dim(1)), L(a.o.dim(2)), R(a.rank), P(a.o.dim(4)) {}
  // Row (b, h, t, r) of o; row = b L + t of z and y.
  int64_t o_row(int64_t row, int64_t h, int64_t r) const {
    return ((row / L * H + h) * L + row % L) * R + r;
  }
};

}  // namespace

template <typename T>
void mamba3_output(const ops::Mamba3OutputArgs& a) {
  const OutputDims d(a);
  const int64_t H = d.H, P = d.P, R = d.R;
  const RowsIn<T> z(a.z);
  const RowsOut<T> y(a.y);
  const T *mimo_z = in_or_null<T>(a.mimo_z), *mimo_o = in_or_null<T>(a.mimo_o);
  const T* norm = in_or_null<T>(a.norm);
  std::vector<double> acc(P);
  for (int64_t row = 0; row < d.B * d.L; ++row)
    for (int64_t h = 0; h < H; ++h) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t r = 0; r < R; ++r) {
        const T* o = a.o.data<T>() + d.o_row(row, h, r) * P;
        const double s = norm ? inv_rms(o, P, a.norm_eps) : 1.0;
        for (int64_t p = 0; p < P; ++p) {
          const int64_t m = (h * R + r) * P + p;
          const double zr = z(row, h * P + p) * (mimo_z ? static_cast<double>(mimo_z[m]) : 1.0);
          const double on = norm ? o[p] * s * norm[h * P + p] : static_cast<double>(o[p]);
          acc[p] += on * ops::silu(zr) * (mimo_o ? static_cast<double>(mimo_o[m]) : 1.0);
        }
      }
      for (int64_t p = 0; p < P; ++p) y(row, h * P + p) = static_cast<T>(acc[p]);
    }
}

template <typename T>
void mamba3_output_backward(const ops::Mamba3OutputBackwardArgs& g) {
  const ops::Mamba3OutputArgs& a = g.fwd;
  const OutputDims d(a);
  const int64_t H = d.H, P = d.P, R = d.R;
  const RowsIn<T> z(a.z), dy(g.dy);
  const RowsOut<T> dz(g.dz);
  const T *mimo_z = in_or_null<T>(a.mimo_z), *mimo_o = in_or_null<T>(a.mimo_o);
  const T* norm = in_or_null<T>(a.norm);
  T* d_o = out<T>(g.d_o);
  std::vector<double> dmimo_z(H * R * P, 0.0), dmimo_o(H * R * P, 0.0), dnorm(H * P, 0.0);
  std::vector<double> dz_row(P), don(P);
  for (int64_t row = 0; row < d.B * d.L; ++row)
    for (int64_t h = 0; h < H; ++h) {
      std::fill(dz_row.begin(), dz_row.end(), 0.0);
      for (int64_t r = 0; r < R; ++r) {
        const int64_t at = d.o_row(row, h, r) * P;
        const T* o = a.o.data<T>() + at;
        const double s = norm ? inv_rms(o, P, a.norm_eps) : 1.0;
        for (int64_t p = 0; p < P; ++p) {
          const int64_t m = (h * R + r) * P + p;
          const double mz = mimo_z ? static_cast<double>(mimo_z[m]) : 1.0;
          const double mo = mimo_o ? static_cast<double>(mimo_o[m]) : 1.0;
          const double zr = z(row, h * P + p) * mz, gate = ops::silu(zr);
          const double on = norm ? o[p] * s * norm[h * P + p] : static_cast<double>(o[p]);
          const double dgated = dy(row, h * P + p) * mo;  // gradient of on * gate
          dmimo_o[m] += dy(row, h * P + p) * on * gate;
          const double dzr = dgated * on * ops::silu_grad(zr);
          dz_row[p] += dzr * mz;
          dmimo_z[m] += dzr * z(row, h * P + p);
          don[p] = dgated * gate;  // gradient of on
        }
        if (!norm) {
          for (int64_t p = 0; p < P; ++p) d_o[at + p] = static_cast<T>(don[p]);
          continue;
        }
        // on = o s w: d_o = s w don - o s^3 sum(o w don) / P.
        double dot = 0;
        for (int64_t p = 0; p < P; ++p) {
          dot += static_cast<double>(o[p]) * norm[h * P + p] * don[p];
          dnorm[h * P + p] += don[p] * o[p] * s;
        }
        for (int64_t p = 0; p < P; ++p)
          d_o[at + p] = static_cast<T>(s * norm[h * P + p] * don[p] -
                                       o[p] * dot * s * s * s / static_cast<double>(P));
      }
      for (int64_t p = 0; p < P; ++p) dz(row, h * P + p) = static_cast<T>(dz_row[p]);
    }
  accumulate<T>(g.dmimo_z, dmimo_z);
  accumulate<T>(g.dmimo_o, dmimo_o);
  accumulate<T>(g.dnorm, dnorm);
}

template void mamba3_output<float>(const ops::Mamba3OutputArgs&);
template void mamba3_output<double>(const ops::Mamba3OutputArgs&);
template void mamba3_output_backward<float>(const ops::Mamba3OutputBackwardArgs&);
template void mamba3_output_backward<double>(const ops::Mamba3OutputBackwardArgs&);

}  // namespace ssm::ref
