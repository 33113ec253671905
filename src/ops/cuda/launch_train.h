// The launchers of the backward ops and the optimiser on the GPU, in plain
// types (as launch.h). Every reduction runs in a fixed order, so results
// repeat bit for bit between runs: parameter gradients are summed first into
// per-block partial rows (`partial`, scratch the caller allocates), then over
// those rows in order by launch_column_sums.
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// Partial rows used by the two-stage reductions: a fixed count, so results
// do not depend on the problem's row count splitting.
inline constexpr int kPartialRows = 128;

// dst[c] += sum over r of src[r, c], rows summed in order.
void launch_column_sums(ConstRows src, float* dst, cudaStream_t s);

// RMSNorm backward (ops/rms_norm.h); partial: kPartialRows x D (when dw),
// every row of it written (the norms' and conv1d's launchers need no zeroed
// scratch).
void launch_rms_norm_backward(ConstRows x, const float* w, float eps, ConstRows dout, Rows dx,
                              bool accumulate_dx, float* partial, cudaStream_t s);
// The gated grouped norm's backward; partial: kPartialRows x D (when w and dw).
void launch_gated_rms_norm_backward(ConstRows y, ConstRows z, const float* w, int64_t group,
                                    float eps, bool norm_before_gate, ConstRows dout, Rows dy,
                                    Rows dz, float* partial, cudaStream_t s);

// conv1d backward (zero starting state). dpre: B*L x C dense scratch for
// K > kConv1dOnePassTaps (one pass without it otherwise); partial:
// kPartialRows x C*(K+1) (dweight taps, then dbias), when wanted.
inline constexpr int64_t kConv1dOnePassTaps = 4;
struct Conv1dBackwardLaunch {
  ConstRows in, dout;
  const float* weight;
  const float* bias;
  Rows din;
  float* dpre;
  float* partial;
  int64_t B, L, C, K;
  bool silu;
};
void launch_conv1d_backward(const Conv1dBackwardLaunch& a, cudaStream_t s);

// ssd_prepare backward: ddt_raw, then ddt_bias[h] += sum_r ddt_raw[r, h],
// dA_log[h] += dA[h] A[h] (either pointer null: not wanted).
void launch_ssd_prepare_backward(ConstRows dt_raw, const float* dt_bias, const float* A_log,
                                 float dt_min, float dt_max, ConstRows ddt, const float* dA,
                                 Rows ddt_raw, float* ddt_bias, float* dA_log, cudaStream_t s);

// The SSD scan backward in the chunked form (ssd_scan_backward.cu).
struct SsdScanBackwardLaunch {
  int64_t B, L, H, P, N, G, Q;  // Q: steps per chunk
  ConstRows x, Bm, C, dt, dy;
  const float* A;
  const float* D;       // or null
  const float* state0;  // (B, H, P, N) or null
  Rows dx, dB, dC, ddt;
  float* dA;  // (H) accumulated
  float* dD;  // (H) accumulated, or null
  // Scratch (dense F32): chunk states and state gradients (B*H*chunks*P*N
  // each), chunk decays (B*H*chunks), per-head dB and dC (B*L*H*N each),
  // per-step decay gradients (B*L*H), per-(b, h) sums (2*B*H).
  float *states, *dstates, *decay, *dBh, *dCh, *g, *sums;
  // Or null: C B^T of each (b, chunk, group), 64 x 64 (ssd_backward_cb_floats),
  // made once for the heads of a group by the tiles' chunk_sums launch.
  float* cb = nullptr;
  // The tensor-core passes' products: 3xTF32 (F32-exact), or one TF32
  // product each for a context that rounds its products
  // (CudaResources::rounds_products).
  bool split = true;
  // Under split false, chunk_backward with FP16 operands
  // (ssd_scan_backward_f16.cu) where it fits: CudaResources::ssd_backward_f16.
  bool f16 = false;
};
// The scratch floats launch_ssd_scan_backward needs, and the chunk length
// (split: SsdScanBackwardLaunch::split).
int64_t ssd_backward_chunk(int64_t P, int64_t N, bool split);
int64_t ssd_backward_scratch(int64_t B, int64_t L, int64_t H, int64_t P, int64_t N, int64_t Q);
void launch_ssd_scan_backward(const SsdScanBackwardLaunch& a, cudaStream_t s);
// Its passes 1 and 3 on the tensor cores (ssd_scan_backward_tiles.cu), for
// chunks of 64 steps where the tiles of (P, N) fit shared memory; used
// when the context rounds its products (split false) only: see
// launch_ssd_scan_backward.
bool ssd_backward_tiles_fit(int64_t P, int64_t N);
int64_t ssd_backward_cb_floats(int64_t B, int64_t L, int64_t G);
void launch_ssd_chunk_sums_tiles(const SsdScanBackwardLaunch& a, cudaStream_t s);
void launch_ssd_chunk_backward_tiles(const SsdScanBackwardLaunch& a, cudaStream_t s);
// Its pass 3 with FP16 operands (ssd_scan_backward_f16.cu; the default
// where it fits, SsdScanBackwardLaunch::f16): where the tiles fit and its
// shared memory does, with chunk_cb's C B^T (cb).
bool ssd_backward_f16_fit(int64_t P, int64_t N);
void launch_ssd_chunk_backward_f16(const SsdScanBackwardLaunch& a, cudaStream_t s);

// dtable[ids[order[i]]] += scale dout[order[i]] for the runs [seg[j],
// seg[j+1]) of one id each (order sorted by id, rows in order within a run),
// from `meta` on the device: order (rows), seg (rows + 1), seg_id (rows),
// then the number of runs, a fixed layout for any ids of `rows` rows, so
// that a recorded training step reads the next step's runs from the same
// bytes (the grid does not depend on them).
inline constexpr int64_t embedding_meta_words(int64_t rows) { return 3 * rows + 2; }
void launch_embedding_backward(const int64_t* meta, int64_t rows, ConstRows dout, float scale,
                               float* dtable, int64_t D, cudaStream_t s);

// Softmax cross-entropy of a block of logits rows over their first V
// columns: loss[r] written in double (0 without a target), and the rows'
// gradient grad_scale (softmax - onehot) (zero in columns V.. and on rows
// without a target) written in place, or, with g_bf16, rounded to bf16
// into the rows of g_bf16 (g_stride apart; the logits then stay); with
// grad_scale 0 no gradient is written.
void launch_softmax_xent(Rows logits, int64_t V, const int64_t* targets, double grad_scale,
                         double* loss, void* g_bf16, int64_t g_stride, cudaStream_t s);
// *out = sum of v[0..n) in double, in order of a fixed tree.
void launch_sum_doubles(const double* v, int64_t n, double* out, cudaStream_t s);

// *out = the sum of squares of p[0..n) in double, over kSumBlocks blocks
// (partial: kSumBlocks doubles of scratch), then their partial sums in order.
inline constexpr int kSumBlocks = 264;
void launch_sum_squares_dense(const float* p, int64_t n, double* partial, double* out,
                              cudaStream_t s);

// One AdamW step's scalars (ops/adamw.h), in double: decay = 1 - lr wd
// for the slices that decay, no_decay = 1 - lr 0 for the rest; bias
// corrections bc1, bc2. The fused update's clip (AdamWSlicesArgs): the
// squared norm on the device, or null.
struct AdamWStep {
  double lr = 0, b1 = 0, b2 = 0, eps = 0, decay = 1, no_decay = 1, bc1 = 1, bc2 = 1;
  const double* clip_sum_squares = nullptr;
  double max_norm = 0;
};
AdamWStep adamw_step(double lr, double b1, double b2, double eps, double wd, double bc1,
                     double bc2);
// AdamW over n elements (decay: step.decay).
void launch_adamw(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& step,
                  cudaStream_t s);
// One slice of the fused update: ops::AdamWSlice's layout (optimizer_ops.cpp
// checks that the two agree). begin: a multiple of 4, the slices padded to
// whole quads (elements counts the padding).
struct AdamWSliceLaunch {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t begin, n;
  int64_t decays;
  unsigned short* bf16;  // null, or where each new value goes rounded to bf16
};
// AdamW over every element of the slices of table (on the device), the
// gradients clipped first when step->clip_sum_squares. The scalars too are
// read on the device, so that a recorded training step takes each step's
// rate and bias corrections from the same bytes.
void launch_adamw_slices(const AdamWSliceLaunch* table, int64_t slices, int64_t elements,
                         const AdamWStep* step, cudaStream_t s);

}  // namespace ssm::cuda
