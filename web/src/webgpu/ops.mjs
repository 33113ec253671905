// The engine's forward ops (include/ssm/ops/*.h) as WebGPU dispatches. Each
// function queues its kernels on `gpu` (see gpu.mjs); nothing runs until the
// caller submits or reads. A tensor argument is a view {buf, off, ld}: a GPU
// buffer of float32, the offset of its first element and the stride between
// rows, both in elements, so that column blocks of a wider buffer (in_proj's
// output) are read in place. Dense tensors pass a bare buffer.

import { WG } from './gpu.mjs';

const f = (x) => ({ f: x });
const view = (v, ld = 0) => (v && v.buf ? v : { buf: v, off: 0, ld });

// y (+)= x W^T + bias over M rows; W is (N, K).
export function linear(gpu, { x, W, bias = null, y, M, N, K, accumulate = false }) {
  const xv = view(x, K), yv = view(y, N);
  if (Array.isArray(W)) {
    // A weight in pieces of rows (gpu.uploadRows): each piece its columns of y.
    if (bias) throw new Error('webgpu: a weight in pieces takes no bias');
    for (const p of W)
      linear(gpu, { x: xv, W: p.buf, y: { buf: yv.buf, off: yv.off + p.r0, ld: yv.ld }, M, N: p.r1 - p.r0, K, accumulate });
    return;
  }
  const words = [M, N, K, xv.off, xv.ld, yv.off, yv.ld, bias ? 1 : 0, accumulate ? 1 : 0];
  // A few rows (decode) read W once per row instead of staging 16-row tiles.
  if (M <= 4) gpu.dispatch('linear_rows', words, [xv.buf, W, bias, yv.buf], [Math.ceil(N / WG), M, 1]);
  else gpu.dispatch('linear', words, [xv.buf, W, bias, yv.buf], [Math.ceil(N / 64), Math.ceil(M / 32), 1]);
}

// E: a buffer, or pieces of rows (gpu.uploadRows), each looked up for the ids it holds.
export function embedding(gpu, { ids, E, out, rows, D, scale = 1 }) {
  for (const p of Array.isArray(E) ? E : [{ buf: E, r0: 0, r1: 0xffffffff }])
    gpu.dispatch('embedding', [rows, D, f(scale), p.r0, p.r1], [ids, p.buf, out], rows * D);
}

// RMSNorm of `runs` consecutive runs of n channels per row (w: runs * n, or null).
export function rmsNorm(gpu, { x, w, out, rows, n, runs = 1, eps }) {
  const xv = view(x, n * runs), ov = view(out, n * runs);
  gpu.dispatch('rms_norm', [rows, n, runs, xv.off, xv.ld, ov.off, ov.ld, w ? 1 : 0, f(eps)], [xv.buf, w, ov.buf],
    rows * runs * WG);
}

export function gatedRmsNorm(gpu, { y, z, w = null, out, rows, n, runs = 1, eps = 1e-5, normBeforeGate = false }) {
  const yv = view(y, n * runs), zv = view(z, n * runs), ov = view(out, n * runs);
  gpu.dispatch('gated_rms_norm',
    [rows, n, runs, yv.off, yv.ld, zv.off, zv.ld, ov.off, ov.ld, w ? 1 : 0, normBeforeGate ? 1 : 0, f(eps)],
    [yv.buf, zv.buf, w, ov.buf], rows * runs * WG);
}

// Causal depthwise conv over (B, L, C) with its (B, K-1, C) state, updated.
export function conv1d(gpu, { input, weight, bias = null, state, out, B, L, C, K, silu = true }) {
  const iv = view(input, C), ov = view(out, C);
  const next = gpu.scratch('conv_next', B * (K - 1) * C);
  gpu.dispatch('conv1d', [B, L, C, K, iv.off, iv.ld, ov.off, ov.ld, bias ? 1 : 0, silu ? 1 : 0],
    [iv.buf, weight, bias, state, ov.buf, next], Math.max(B * L * C, B * (K - 1) * C));
  gpu.copy(next, 0, state, 0, B * (K - 1) * C * 4);
}

export function ssdPrepare(gpu, { dtRaw, dtBias, Alog, dt, A, rows, H, dtMin = 0, dtMax = Infinity }) {
  const rv = view(dtRaw, H);
  gpu.dispatch('ssd_prepare', [rows, H, rv.off, rv.ld, f(dtMin), f(dtMax)], [rv.buf, dtBias, Alog, dt, A], rows * H);
}

// The SSD scan. x, B and C are column blocks of one buffer `xbc` with row
// stride ld (offsets xOff, bOff, cOff); dt is (B L, H) dense; state is
// (B, H, P, N), read and replaced. L = 1 runs the recurrence step, longer
// inputs the chunked form with chunks of Q steps.
export function ssdScan(gpu, { xbc, xOff, bOff, cOff, ld, dt, A, D = null, y, state, B, L, H, P, G, N, Q }) {
  const yv = view(y, H * P);
  const words = [B, L, H, P, G, N, Q, xOff, bOff, cOff, ld, yv.off, yv.ld, D ? 1 : 0];
  if (L === 1) {
    gpu.dispatch('ssd_step', words, [xbc, dt, A, D, yv.buf, state], B * H * P);
    return;
  }
  const nch = Math.ceil(L / Q);
  const cum = gpu.scratch('ssd_cum', B * H * L);
  const chunkS = gpu.scratch('chunk_states', B * H * nch * P * N);
  const sin = gpu.scratch('chunk_in', B * H * nch * P * N);
  gpu.dispatch('ssd_cumsum', words, [dt, A, cum], B * H * nch);
  gpu.dispatch('ssd_chunk_state', words, [xbc, dt, cum, chunkS], B * H * nch * P * N);
  gpu.dispatch('chunk_state_pass', [B * H, nch, L, Q, P * N, 1], [cum, chunkS, sin, state], B * H * P * N);
  const cb = gpu.scratch('scores', B * G * L * Q);
  gpu.dispatch('ssd_scores', words, [xbc, cb], B * G * L * Q);
  gpu.dispatch('ssd_chunk_out', words, [xbc, dt, cum, sin, D, yv.buf, cb], B * L * H * P);
}

// mamba3_prepare: in_proj's output `proj` (row stride ld) -> dal (B, H, L, 3:
// dt, A, lam), phases (B, H, L, S), bn / cn (B L, R G N), q, k (B, H, L, R, N),
// v (B, H, L, R, P); phase (B, H, S) advanced in place. cols gives the
// column offsets of the blocks x, B, C, ddt, ddA, trap, ang.
export function mamba3Prepare(gpu, a) {
  const { proj, off = 0, ld, cols, B, L, H, G, R, P, N, S, halves, Afloor, eps } = a;
  gpu.dispatch('m3_scalars', [B, L, H, S, off, ld, cols.ddt, cols.ddA, cols.trap, cols.ang, f(Afloor)],
    [proj, a.dtBias, a.phase, a.dal, a.phases], B * H);
  gpu.dispatch('m3_bc_norm', [B * L, R * G, N, off, ld, cols.B, cols.C, f(eps)],
    [proj, a.Bnorm, a.Cnorm, a.bn, a.cn], B * L * R * G * 2);
  gpu.dispatch('m3_qk', [B, L, H, R, G, N, S, halves ? 1 : 0],
    [a.bn, a.cn, a.Bbias, a.Cbias, a.phases, a.q, a.k], B * H * L * R * N);
  gpu.dispatch('m3_v', [B, L, H, R, P, off, ld, cols.x, a.mimoX ? 1 : 0], [proj, a.mimoX, a.v], B * H * L * R * P);
}

// mamba3_scan: o (B, H, L, R, P) from q, k, v, dal; ssm (B, H, P, N) and
// prev (k_prev (B, H, R, N) then v_prev (B, H, R, P)) read and replaced.
// `chunk` counts rows (steps x ranks), as the engine's chunk_size does.
export function mamba3Scan(gpu, { q, k, v, dal, D = null, o, ssm, prev, B, H, L, R, P, N, chunk }) {
  const BH = B * H;
  if (L === 1) {
    gpu.dispatch('m3_step', [BH, H, R, P, N, D ? 1 : 0], [q, k, v, dal, D, o, ssm, prev], BH * P);
  } else {
    const Tq = Math.max(1, Math.floor(chunk / R));
    const nch = Math.ceil(L / Tq);
    const coef = gpu.scratch('m3_coef', BH * L * 3);
    const chunkS = gpu.scratch('chunk_states', BH * nch * P * N);
    const sin = gpu.scratch('chunk_in', BH * nch * P * N);
    gpu.dispatch('m3_coeffs', [BH, L, Tq], [dal, coef], BH * nch);
    gpu.dispatch('m3_pending', [BH, P, N, R, L], [dal, ssm, prev], BH * P * N);
    gpu.dispatch('m3_chunk_state', [BH, L, Tq, R, P, N], [k, v, coef, chunkS], BH * nch * P * N);
    gpu.dispatch('chunk_state_pass', [BH, nch, L, Tq, P * N, 3], [coef, chunkS, sin, ssm], BH * P * N);
    const qk = gpu.scratch('scores', BH * L * R * Tq * R);
    gpu.dispatch('m3_scores', [BH, L, Tq, R, P, N], [q, k, qk], BH * L * R * Tq * R);
    gpu.dispatch('m3_chunk_out', [BH, L, Tq, R, P, N, H, D ? 1 : 0], [q, qk, v, coef, sin, D, o], BH * L * R * P);
  }
  gpu.dispatch('m3_finish', [BH, L, R, N, P], [k, v, prev], BH * R * (N + P));
}

export function mamba3Output(gpu, { o, z, mimoZ = null, mimoO = null, norm = null, eps = 1e-5, y, B, L, H, R, P }) {
  const zv = view(z, H * P), yv = view(y, H * P);
  gpu.dispatch('m3_output', [B, L, H, R, P, zv.off, zv.ld, yv.off, yv.ld, mimoZ ? 1 : 0, norm ? 1 : 0, f(eps)],
    [o, zv.buf, mimoZ, mimoO, norm, yv.buf], B * L * H * P);
}

// Attention over qkv rows (B L, (H + 2 Hkv) hd), dense: rotary, append to
// the caches (B, Hkv, cap, hd) at positions past.., softmax attention -> out
// (B L, H hd).
export function attention(gpu, { qkv, kCache, vCache, invFreq = null, rotHalf = 0, out, B, L, H, Hkv, hd, past, cap, scale }) {
  const half = invFreq ? rotHalf : 0;
  gpu.dispatch('att_append', [B, L, H, Hkv, hd, past, cap, half], [qkv, kCache, vCache, invFreq], B * L * (H + Hkv));
  const keys = past + L;
  const scratch = gpu.scratch('att_scores', B * L * H * keys);
  gpu.dispatch('att_softmax', [B, L, H, Hkv, hd, past, cap, f(scale), keys], [qkv, kCache, vCache, out, scratch],
    B * L * H * WG);
}

export function kvCopy(gpu, { src, dst, B, Hkv, len, hd, cap, cap2 }) {
  if (len > 0) gpu.dispatch('kv_copy', [B, Hkv, len, hd, cap, cap2], [src, dst], B * Hkv * len * hd);
}

// tokens[b] <- the token chosen from row b of logits (rows of rowLd floats
// from rowOff; the first V are the real vocabulary) by the engine's sampler
// options (kernels/sample.mjs): temperature 0 is greedy.
export function selectToken(gpu, { logits, tokens, B, V, rowLd, rowOff = 0, temperature = 0, seed = 0, step = 0,
  topK = 0, topP = 1, minP = 0 }) {
  gpu.dispatch('select_token', [B, V, rowLd, rowOff, f(temperature), seed, step, topK, f(topP), f(minP)],
    [logits, tokens], [B, 1, 1]);
}

// The repetition penalty on the logits of each sequence's recent ids
// (recent: B n u32), in place.
export function repeatPenalty(gpu, { logits, recent, B, n, V, rowLd, rowOff = 0, penalty }) {
  if (n > 0 && penalty !== 1) gpu.dispatch('repeat_penalty', [B, n, rowLd, rowOff, f(penalty), V], [logits, recent], [B, 1, 1]);
}
