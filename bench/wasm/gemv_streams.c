// Which order of weight rows a WebAssembly SIMD128 matrix-vector product
// should read them in (docs/WEB.md, Speed): y = W x for F32 W of n rows of K,
// four rows per pass with each vector of x loaded once for the four, the
// rows either neighbours (j .. j+3) or far apart (j, j + n/4, j + n/2,
// j + 3n/4); and one row at a time. `streaming` cycles through 10 MB of
// weights (they come from L3 or memory, as a decode step's do), otherwise
// the same n x K block is reused (it stays in L2). Run by gemv_streams.mjs:
//
//   emcc -O3 -msimd128 bench/wasm/gemv_streams.c -o /tmp/gemv_streams.mjs \
//     -sEXPORTED_FUNCTIONS=_gemv_streams -sMODULARIZE -sEXPORT_ES6 -sINITIAL_MEMORY=64MB
//   node bench/wasm/gemv_streams.mjs /tmp/gemv_streams.mjs
#include <emscripten.h>
#include <stdint.h>
#include <stdlib.h>
#include <wasm_simd128.h>

enum { kWeights = 2560 * 1024 };  // floats: 10 MB

static float sum_lanes(v128_t v) {
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(v, 0);
}

// Rows r[0..3] against x, two vectors of K per step (K a multiple of 8).
static void four_rows(const float* r0, const float* r1, const float* r2, const float* r3,
                      const float* x, int K, float* out) {
  v128_t a0 = wasm_f32x4_splat(0.f), a1 = a0, a2 = a0, a3 = a0;
#pragma clang loop unroll(disable)
  for (int k = 0; k < K; k += 8, r0 += 8, r1 += 8, r2 += 8, r3 += 8) {
    const v128_t x0 = wasm_v128_load(x + k), x1 = wasm_v128_load(x + k + 4);
#define ROW(a, r)                                                                  \
  a = wasm_f32x4_add(a, wasm_f32x4_add(wasm_f32x4_mul(wasm_v128_load(r), x0), \
                                       wasm_f32x4_mul(wasm_v128_load(r + 4), x1)))
    ROW(a0, r0);
    ROW(a1, r1);
    ROW(a2, r2);
    ROW(a3, r3);
#undef ROW
  }
  out[0] = sum_lanes(a0);
  out[1] = sum_lanes(a1);
  out[2] = sum_lanes(a2);
  out[3] = sum_lanes(a3);
}

static void neighbours(const float* W, const float* x, float* y, int n, int K) {
  for (int j = 0; j + 4 <= n; j += 4) {
    const float* r = W + (size_t)j * K;
    four_rows(r, r + K, r + 2 * K, r + 3 * K, x, K, y + j);
  }
}

static void far_apart(const float* W, const float* x, float* y, int n, int K) {
  const int q = n / 4;
  for (int j = 0; j < q; ++j) {
    const float* r = W + (size_t)j * K;
    const size_t s = (size_t)q * K;
    float out[4];
    four_rows(r, r + s, r + 2 * s, r + 3 * s, x, K, out);
    for (int i = 0; i < 4; ++i) y[j + i * q] = out[i];
  }
}

static void one_row(const float* W, const float* x, float* y, int n, int K) {
  const float* r = W;
  for (int j = 0; j < n; ++j) {
    v128_t a0 = wasm_f32x4_splat(0.f), a1 = a0;
#pragma clang loop unroll(disable)
    for (int k = 0; k < K; k += 8, r += 8) {
      a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wasm_v128_load(r), wasm_v128_load(x + k)));
      a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(wasm_v128_load(r + 4), wasm_v128_load(x + k + 4)));
    }
    y[j] = sum_lanes(wasm_f32x4_add(a0, a1));
  }
}

// Runs variant `which` (0 neighbours, 1 far apart, 2 one row) `reps` times on
// n x K (n a multiple of 4, K of 8, n K <= kWeights); returns a checksum.
EMSCRIPTEN_KEEPALIVE double gemv_streams(int which, int n, int K, int reps, int streaming) {
  static float *W, *x, *y;
  if (!W) {
    W = aligned_alloc(16, sizeof(float) * kWeights);
    x = aligned_alloc(16, sizeof(float) * 4096);
    y = aligned_alloc(16, sizeof(float) * 4096);
    for (int i = 0; i < kWeights; ++i) W[i] = (float)(i % 97) * 0.01f;
    for (int i = 0; i < 4096; ++i) x[i] = (float)(i % 13) * 0.1f;
  }
  void (*const fns[])(const float*, const float*, float*, int, int) = {neighbours, far_apart,
                                                                       one_row};
  const int blocks = streaming ? kWeights / (n * K) : 1;
  double check = 0;
  for (int i = 0; i < reps; ++i) {
    fns[which](W + (size_t)(i % blocks) * n * K, x, y, n, K);
    check += y[i % n];
  }
  return check;
}
