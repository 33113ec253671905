// The row loops of a chunk of the SSD backward (ssd_scan_backward.cpp) as
// Highway passes, chosen at run time for the CPU: the library is built for
// the base ISA, where these loops ran two doubles or four floats at a time
// (the skip term one element at a time, its sum a chain of dependent double
// additions). Each output element gets the arithmetic of the scalar loop it
// replaces (built without fused multiply-adds), so the same bits; only the
// skip term's sum over a row is taken in vector lanes.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// dx[i] = Dh dy[i] for i < n; returns the sum over i of double(dy[i]) x[i]
// (in lanes, then across them).
double ssd_skip_row(const float* dy, const float* x, float Dh, int64_t n, float* dx);

// dc[i] += e g[i] and cs[i] = e c[i] for i < n (floats).
void ssd_carried_row(float e, const float* g, const float* c, int64_t n, float* dc, float* cs);

// out[i] += float(w double(g[i])) for i < n.
void ssd_add_weighted_row(double w, const float* g, int64_t n, float* out);

}  // namespace ssm::cpu
