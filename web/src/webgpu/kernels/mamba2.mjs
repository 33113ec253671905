// Mamba-2 (docs/MATH.md §2): the causal conv, dt/A preparation, the SSD
// scan in its chunked form for prefill and as one recurrence step for decode.
import { ENTRY_1D } from './common.mjs';

// out[b, t, c] = act(bias[c] + sum_k w[c, k] in[t - K + 1 + k]), inputs
// before t = 0 from the state; Next receives the last K-1 inputs of (state,
// then this call's), copied over the state afterwards (in place would race).
// params: B L C K in_off in_ld out_off out_ld has_bias silu
export const conv1d = /* wgsl */ `
@group(0) @binding(1) var<storage, read> In: array<f32>;
@group(0) @binding(2) var<storage, read> Wt: array<f32>;
@group(0) @binding(3) var<storage, read> Bias: array<f32>;
@group(0) @binding(4) var<storage, read> State: array<f32>;
@group(0) @binding(5) var<storage, read_write> Out: array<f32>;
@group(0) @binding(6) var<storage, read_write> Next: array<f32>;
fn input(b: u32, s: i32, c: u32) -> f32 {
  let L = pu(1u); let C = pu(2u); let K = pu(3u);
  if (s >= 0) { return In[pu(4u) + (b * L + u32(s)) * pu(5u) + c]; }
  return State[(b * (K - 1u) + u32(s + i32(K) - 1)) * C + c];
}
${ENTRY_1D}
  let B = pu(0u); let L = pu(1u); let C = pu(2u); let K = pu(3u);
  if (i < B * L * C) {
    let c = i % C; let t = (i / C) % L; let b = i / (C * L);
    var acc = 0.0;
    if (pu(8u) != 0u) { acc = Bias[c]; }
    for (var k = 0u; k < K; k++) { acc += Wt[c * K + k] * input(b, i32(t) - i32(K) + 1 + i32(k), c); }
    if (pu(9u) != 0u) { acc = silu(acc); }
    Out[pu(6u) + (b * L + t) * pu(7u) + c] = acc;
  }
  if (i < B * (K - 1u) * C) {
    let c = i % C; let s = (i / C) % (K - 1u); let b = i / (C * (K - 1u));
    Next[i] = input(b, i32(L) - i32(K - 1u) + i32(s), c);
  }
}`;

// dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max), A = -exp(A_log).
// params: rows H raw_off raw_ld dt_min dt_max
export const ssd_prepare = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Raw: array<f32>;
@group(0) @binding(2) var<storage, read> DtBias: array<f32>;
@group(0) @binding(3) var<storage, read> Alog: array<f32>;
@group(0) @binding(4) var<storage, read_write> Dt: array<f32>;
@group(0) @binding(5) var<storage, read_write> A: array<f32>;
${ENTRY_1D}
  let H = pu(1u);
  if (i >= pu(0u) * H) { return; }
  let h = i % H; let r = i / H;
  Dt[i] = clamp(softplus(Raw[pu(2u) + r * pu(3u) + h] + DtBias[h]), pf(4u), pf(5u));
  if (r == 0u) { A[h] = -exp(Alog[h]); }
}`;

// The SSD scan's shapes: B L H P G N Q, then the column offsets of x, B and
// C in the one buffer that holds them (row stride ld), then y's.
const SSD_DIMS = /* wgsl */ `
fn dB() -> u32 { return pu(0u); } fn dL() -> u32 { return pu(1u); } fn dH() -> u32 { return pu(2u); }
fn dP() -> u32 { return pu(3u); } fn dG() -> u32 { return pu(4u); } fn dN() -> u32 { return pu(5u); }
fn dQ() -> u32 { return pu(6u); } fn nch() -> u32 { return (dL() + dQ() - 1u) / dQ(); }
fn xat(b: u32, t: u32, h: u32, p: u32) -> u32 { return pu(7u) + (b * dL() + t) * pu(10u) + h * dP() + p; }
fn bat(b: u32, t: u32, g: u32, n: u32) -> u32 { return pu(8u) + (b * dL() + t) * pu(10u) + g * dN() + n; }
fn cat_(b: u32, t: u32, g: u32, n: u32) -> u32 { return pu(9u) + (b * dL() + t) * pu(10u) + g * dN() + n; }
fn grp(h: u32) -> u32 { return h / (dH() / dG()); }
`;

// cum[b, h, t] = sum of dt A from the start of t's chunk through t.
// params: B L H P G N Q x_off b_off c_off ld y_off y_ld has_D
export const ssd_cumsum = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Dt: array<f32>;
@group(0) @binding(2) var<storage, read> A: array<f32>;
@group(0) @binding(3) var<storage, read_write> Cum: array<f32>;
${SSD_DIMS}
${ENTRY_1D}
  let n_ch = nch();
  if (i >= dB() * dH() * n_ch) { return; }
  let ch = i % n_ch; let h = (i / n_ch) % dH(); let b = i / (n_ch * dH());
  let t1 = min(dL(), (ch + 1u) * dQ());
  var c = 0.0;
  for (var t = ch * dQ(); t < t1; t++) {
    c += Dt[(b * dL() + t) * dH() + h] * A[h];
    Cum[(b * dH() + h) * dL() + t] = c;
  }
}`;

// What each chunk adds to the state, starting from zero:
// S_c[p, n] = sum_s exp(c_end - c_s) dt_s x_s[p] B_s[n].
export const ssd_chunk_state = /* wgsl */ `
@group(0) @binding(1) var<storage, read> XBC: array<f32>;
@group(0) @binding(2) var<storage, read> Dt: array<f32>;
@group(0) @binding(3) var<storage, read> Cum: array<f32>;
@group(0) @binding(4) var<storage, read_write> ChunkS: array<f32>;
${SSD_DIMS}
${ENTRY_1D}
  let N = dN(); let P = dP(); let n_ch = nch();
  if (i >= dB() * dH() * n_ch * P * N) { return; }
  let n = i % N; let p = (i / N) % P; let ch = (i / (N * P)) % n_ch;
  let bh = i / (N * P * n_ch); let h = bh % dH(); let b = bh / dH();
  let t0 = ch * dQ(); let t1 = min(dL(), t0 + dQ());
  let c_end = Cum[bh * dL() + t1 - 1u];
  var acc = 0.0;
  for (var s = t0; s < t1; s++) {
    acc += decay(c_end - Cum[bh * dL() + s]) * Dt[(b * dL() + s) * dH() + h] * XBC[xat(b, s, h, p)] *
           XBC[bat(b, s, grp(h), n)];
  }
  ChunkS[i] = acc;
}`;

// The state entering each chunk, one (sequence, head, state entry) per
// thread through the chunks in order: S_in[c] = S, S <- exp(c_end) S + S_c.
// The last S is the new decode state. Shared by Mamba-2 and Mamba-3.
// params: BH n_chunks L Q PN cum_stride
export const chunk_state_pass = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Cum: array<f32>;
@group(0) @binding(2) var<storage, read> ChunkS: array<f32>;
@group(0) @binding(3) var<storage, read_write> Sin: array<f32>;
@group(0) @binding(4) var<storage, read_write> State: array<f32>;
${ENTRY_1D}
  let n_ch = pu(1u); let L = pu(2u); let Q = pu(3u); let PN = pu(4u);
  if (i >= pu(0u) * PN) { return; }
  let e = i % PN; let bh = i / PN;
  var s = State[i];
  for (var ch = 0u; ch < n_ch; ch++) {
    let at = (bh * n_ch + ch) * PN + e;
    Sin[at] = s;
    let t_end = min(L, (ch + 1u) * Q) - 1u;
    s = decay(Cum[(bh * L + t_end) * pu(5u)]) * s + ChunkS[at];
  }
  State[i] = s;
}`;

// The chunk's score matrix per group, CB[b, g, t, s - chunk start] = C_t . B_s
// for s <= t in t's chunk (Q entries per row), computed once here instead
// of once per head channel in ssd_chunk_out.
export const ssd_scores = /* wgsl */ `
@group(0) @binding(1) var<storage, read> XBC: array<f32>;
@group(0) @binding(2) var<storage, read_write> CB: array<f32>;
${SSD_DIMS}
${ENTRY_1D}
  let Q = dQ(); let L = dL(); let G = dG(); let N = dN();
  if (i >= dB() * G * L * Q) { return; }
  let j = i % Q; let t = (i / Q) % L; let g = (i / (Q * L)) % G; let b = i / (Q * L * G);
  let s = (t / Q) * Q + j;
  if (s > t) { return; }
  var acc = 0.0;
  for (var n = 0u; n < N; n++) { acc += XBC[cat_(b, t, g, n)] * XBC[bat(b, s, g, n)]; }
  CB[i] = acc;
}`;

// y_t[p] = D x_t[p] + sum_{s in chunk, s <= t} (C_t . B_s) exp(c_t - c_s) dt_s x_s[p]
//          + exp(c_t) (S_in C_t)[p]
export const ssd_chunk_out = /* wgsl */ `
@group(0) @binding(1) var<storage, read> XBC: array<f32>;
@group(0) @binding(2) var<storage, read> Dt: array<f32>;
@group(0) @binding(3) var<storage, read> Cum: array<f32>;
@group(0) @binding(4) var<storage, read> Sin: array<f32>;
@group(0) @binding(5) var<storage, read> Dp: array<f32>;
@group(0) @binding(6) var<storage, read_write> Y: array<f32>;
@group(0) @binding(7) var<storage, read> CB: array<f32>;
${SSD_DIMS}
${ENTRY_1D}
  let N = dN(); let P = dP(); let H = dH(); let L = dL(); let Q = dQ();
  if (i >= dB() * L * H * P) { return; }
  let p = i % P; let h = (i / P) % H; let t = (i / (P * H)) % L; let b = i / (P * H * L);
  let g = grp(h); let bh = b * H + h; let ch = t / Q;
  let ct = Cum[bh * L + t];
  let cb = ((b * dG() + g) * L + t) * Q - ch * Q;
  var acc = 0.0;
  if (pu(13u) != 0u) { acc = Dp[h] * XBC[xat(b, t, h, p)]; }
  for (var s = ch * Q; s <= t; s++) {
    acc += CB[cb + s] * decay(ct - Cum[bh * L + s]) * Dt[(b * L + s) * H + h] * XBC[xat(b, s, h, p)];
  }
  let sb = ((bh * nch() + ch) * P + p) * N;
  var sc = 0.0;
  for (var n = 0u; n < N; n++) { sc += Sin[sb + n] * XBC[cat_(b, t, g, n)]; }
  Y[pu(11u) + (b * L + t) * pu(12u) + h * P + p] = acc + decay(ct) * sc;
}`;

// One decode step (L = 1) per (sequence, head, channel), the state in place:
// S = exp(dt A) S + dt x B^T, y = S C + D x.
export const ssd_step = /* wgsl */ `
@group(0) @binding(1) var<storage, read> XBC: array<f32>;
@group(0) @binding(2) var<storage, read> Dt: array<f32>;
@group(0) @binding(3) var<storage, read> A: array<f32>;
@group(0) @binding(4) var<storage, read> Dp: array<f32>;
@group(0) @binding(5) var<storage, read_write> Y: array<f32>;
@group(0) @binding(6) var<storage, read_write> State: array<f32>;
${SSD_DIMS}
${ENTRY_1D}
  let N = dN(); let P = dP(); let H = dH();
  if (i >= dB() * H * P) { return; }
  let p = i % P; let h = (i / P) % H; let b = i / (P * H);
  let g = grp(h);
  let dt = Dt[b * H + h];
  let dA = exp(dt * A[h]);
  let xv = XBC[xat(b, 0u, h, p)];
  var acc = 0.0;
  if (pu(13u) != 0u) { acc = Dp[h] * xv; }
  let sb = ((b * H + h) * P + p) * N;
  for (var n = 0u; n < N; n++) {
    let s = dA * State[sb + n] + dt * xv * XBC[bat(b, 0u, g, n)];
    State[sb + n] = s;
    acc += s * XBC[cat_(b, 0u, g, n)];
  }
  Y[pu(11u) + b * pu(12u) + h * P + p] = acc;
}`;
