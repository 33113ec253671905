// Mamba-3 (docs/MATH.md §3): preparation of dt, A, lam, q, k, v from the
// in_proj columns; the trapezoidal scan, chunked for prefill and stepped for
// decode; the gated output. Scan tensors are head-major, (B, H, L, R, .);
// dt, A and lam are kept interleaved as Dal (B, H, L, 3).
import { ENTRY_1D } from './common.mjs';

// Per (sequence, head), in time order (the phase is a running sum):
//   dt = softplus(ddt + dt_bias), A = min(-f(ddA), -A_floor), lam = sigmoid(trap),
//   phase_j += pi tanh(ang_j) dt, kept for every step in Phases (B, H, L, S).
// params: B L H S proj_off proj_ld ddt_col dda_col trap_col ang_col A_floor
export const m3_scalars = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Proj: array<f32>;
@group(0) @binding(2) var<storage, read> DtBias: array<f32>;
@group(0) @binding(3) var<storage, read_write> Phase: array<f32>;
@group(0) @binding(4) var<storage, read_write> Dal: array<f32>;
@group(0) @binding(5) var<storage, read_write> Phases: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let H = pu(2u); let S = pu(3u);
  if (i >= pu(0u) * H) { return; }
  let h = i % H; let b = i / H;
  for (var t = 0u; t < L; t++) {
    let row = pu(4u) + (b * L + t) * pu(5u);
    let dt = softplus(Proj[row + pu(6u) + h] + DtBias[h]);
    let v = Proj[row + pu(7u) + h];
    var f = 1.0 / (1.0 - v);
    if (v >= 0.0) { f = 1.0 + v; }
    let st = (i * L + t) * 3u;
    Dal[st] = dt;
    Dal[st + 1u] = min(-f, -pf(10u));
    Dal[st + 2u] = sigmoid(Proj[row + pu(8u) + h]);
    for (var j = 0u; j < S; j++) {
      let ph = Phase[i * S + j] + 3.14159265358979 * tanh(Proj[row + pu(9u) + j]) * dt;
      Phase[i * S + j] = ph;
      Phases[(i * L + t) * S + j] = ph;
    }
  }
}`;

// RMSNorm over each run of N entries of B and C (R G runs per row) times
// the norm weights. params: rows RG N proj_off proj_ld b_col c_col eps
export const m3_bc_norm = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Proj: array<f32>;
@group(0) @binding(2) var<storage, read> Bw: array<f32>;
@group(0) @binding(3) var<storage, read> Cw: array<f32>;
@group(0) @binding(4) var<storage, read_write> Bn: array<f32>;
@group(0) @binding(5) var<storage, read_write> Cn: array<f32>;
${ENTRY_1D}
  let RG = pu(1u); let N = pu(2u);
  if (i >= pu(0u) * RG * 2u) { return; }
  let is_c = i % 2u; let run = (i / 2u) % RG; let row = i / (2u * RG);
  var col = pu(5u);
  if (is_c == 1u) { col = pu(6u); }
  let src = pu(3u) + row * pu(4u) + col + run * N;
  var ss = 0.0;
  for (var n = 0u; n < N; n++) { let v = Proj[src + n]; ss += v * v; }
  let r = 1.0 / sqrt(ss / f32(N) + pf(7u));
  let dst = (row * RG + run) * N;
  for (var n = 0u; n < N; n++) {
    if (is_c == 1u) { Cn[dst + n] = Proj[src + n] * r * Cw[n]; }
    else { Bn[dst + n] = Proj[src + n] * r * Bw[n]; }
  }
}`;

// q = rotate(C_normed + C_bias), k = rotate(B_normed + B_bias) by the phase:
// angle j turns the pair (2j, 2j+1) (adjacent, SISO) or (j, j + N/2)
// (halves, MIMO). params: B L H R G N S halves
export const m3_qk = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Bn: array<f32>;
@group(0) @binding(2) var<storage, read> Cn: array<f32>;
@group(0) @binding(3) var<storage, read> Bbias: array<f32>;
@group(0) @binding(4) var<storage, read> Cbias: array<f32>;
@group(0) @binding(5) var<storage, read> Phases: array<f32>;
@group(0) @binding(6) var<storage, read_write> Q: array<f32>;
@group(0) @binding(7) var<storage, read_write> K: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let H = pu(2u); let R = pu(3u); let G = pu(4u); let N = pu(5u); let S = pu(6u);
  if (i >= pu(0u) * H * L * R * N) { return; }
  let n = i % N; let r = (i / N) % R; let t = (i / (N * R)) % L;
  let bh = i / (N * R * L); let h = bh % H; let b = bh / H;
  let g = h / (H / G);
  let src = ((b * L + t) * R * G + r * G + g) * N;
  let bias = (h * R + r) * N;
  // Which angle turns entry n, its partner, and whether n is the pair's first.
  var j = 0u; var partner = n; var first = true; var turned = false;
  if (pu(7u) == 0u) {
    if (n < 2u * S) { j = n / 2u; partner = n ^ 1u; first = n % 2u == 0u; turned = true; }
  } else {
    if (n < S) { j = n; partner = n + N / 2u; turned = true; }
    else if (n >= N / 2u && n < N / 2u + S) { j = n - N / 2u; partner = j; first = false; turned = true; }
  }
  let qa = Cn[src + n] + Cbias[bias + n]; let ka = Bn[src + n] + Bbias[bias + n];
  var qv = qa; var kv = ka;
  if (turned) {
    let sc = sincos(Phases[(bh * L + t) * S + j]);
    let c = sc.y; let s = sc.x;
    let qb = Cn[src + partner] + Cbias[bias + partner];
    let kb = Bn[src + partner] + Bbias[bias + partner];
    if (first) { qv = qa * c - qb * s; kv = ka * c - kb * s; }
    else { qv = qb * s + qa * c; kv = kb * s + ka * c; }
  }
  Q[i] = qv;
  K[i] = kv;
}`;

// v[b, h, t, r, p] = x[b, t, h P + p] mimo_x[h, r, p] (SISO: x).
// params: B L H R P proj_off proj_ld x_col has_mimo
export const m3_v = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Proj: array<f32>;
@group(0) @binding(2) var<storage, read> MimoX: array<f32>;
@group(0) @binding(3) var<storage, read_write> V: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let H = pu(2u); let R = pu(3u); let P = pu(4u);
  if (i >= pu(0u) * H * L * R * P) { return; }
  let p = i % P; let r = (i / P) % R; let t = (i / (P * R)) % L;
  let bh = i / (P * R * L); let h = bh % H; let b = bh / H;
  var m = 1.0;
  if (pu(8u) != 0u) { m = MimoX[(h * R + r) * P + p]; }
  V[i] = Proj[pu(5u) + (b * L + t) * pu(6u) + pu(7u) + h * P + p] * m;
}`;

// Per (sequence, head, chunk of Tq steps): Coef (B, H, L, 3) =
//   cum: sum of A dt from the chunk start through t,
//   w:   the weight of v_t k_t^T, lam_t dt_t + (1 - lam_{t+1}) dt_{t+1}
//        (its own step's and the next's; the last step's next is pending),
//   corr: (1 - lam_{t+1}) dt_{t+1}, the next step's share over-counted at s = t.
// params: BH L Tq
export const m3_coeffs = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Dal: array<f32>;
@group(0) @binding(2) var<storage, read_write> Coef: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let Tq = pu(2u); let n_ch = (L + Tq - 1u) / Tq;
  if (i >= pu(0u) * n_ch) { return; }
  let ch = i % n_ch; let bh = i / n_ch;
  var c = 0.0;
  for (var t = ch * Tq; t < min(L, (ch + 1u) * Tq); t++) {
    let at = (bh * L + t) * 3u;
    c += Dal[at + 1u] * Dal[at];
    var next = 0.0;
    if (t + 1u < L) { next = (1.0 - Dal[at + 5u]) * Dal[at + 3u]; }
    Coef[at] = c;
    Coef[at + 1u] = Dal[at + 2u] * Dal[at] + next;
    Coef[at + 2u] = next;
  }
}`;

// A call that continues a state first adds the previous step's pending
// term: S += (1 - lam_0) dt_0 sum_r v_prev,r k_prev,r^T (zero when fresh).
// Prev holds k_prev (B, H, R, N) then v_prev (B, H, R, P).
// params: BH P N R L
export const m3_pending = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Dal: array<f32>;
@group(0) @binding(2) var<storage, read_write> Ssm: array<f32>;
@group(0) @binding(3) var<storage, read> Prev: array<f32>;
${ENTRY_1D}
  let P = pu(1u); let N = pu(2u); let R = pu(3u); let BH = pu(0u);
  if (i >= BH * P * N) { return; }
  let n = i % N; let p = (i / N) % P; let bh = i / (N * P);
  let at = bh * pu(4u) * 3u;
  let wt = (1.0 - Dal[at + 2u]) * Dal[at];
  var u = 0.0;
  for (var r = 0u; r < R; r++) { u += Prev[BH * R * N + (bh * R + r) * P + p] * Prev[(bh * R + r) * N + n]; }
  Ssm[i] = Ssm[i] + wt * u;
}`;

// What each chunk adds to the state from zero:
// S_c[p, n] = sum_{t in chunk} exp(c_end - c_t) w_t sum_r v_t,r[p] k_t,r[n].
// params: BH L Tq R P N
export const m3_chunk_state = /* wgsl */ `
@group(0) @binding(1) var<storage, read> K: array<f32>;
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read> Coef: array<f32>;
@group(0) @binding(4) var<storage, read_write> ChunkS: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let Tq = pu(2u); let R = pu(3u); let P = pu(4u); let N = pu(5u);
  let n_ch = (L + Tq - 1u) / Tq;
  if (i >= pu(0u) * n_ch * P * N) { return; }
  let n = i % N; let p = (i / N) % P; let ch = (i / (N * P)) % n_ch; let bh = i / (N * P * n_ch);
  let t0 = ch * Tq; let t1 = min(L, t0 + Tq);
  let c_end = Coef[(bh * L + t1 - 1u) * 3u];
  var acc = 0.0;
  for (var t = t0; t < t1; t++) {
    let at = (bh * L + t) * 3u;
    var u = 0.0;
    for (var r = 0u; r < R; r++) { u += V[((bh * L + t) * R + r) * P + p] * K[((bh * L + t) * R + r) * N + n]; }
    acc += decay(c_end - Coef[at]) * Coef[at + 1u] * u;
  }
  ChunkS[i] = acc;
}`;

// The chunk's scores per head, QK[bh, t, R', s - chunk start, r] =
// q_t,R' . k_s,r for s <= t in t's chunk, computed once here instead of once
// per head channel in m3_chunk_out. params: BH L Tq R P N
export const m3_scores = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read_write> QK: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let Tq = pu(2u); let R = pu(3u); let N = pu(5u);
  if (i >= pu(0u) * L * R * Tq * R) { return; }
  let r = i % R; let j = (i / R) % Tq; let ro = (i / (R * Tq)) % R; let t = (i / (R * Tq * R)) % L;
  let bh = i / (R * Tq * R * L);
  let s = (t / Tq) * Tq + j;
  if (s > t) { return; }
  let qb = ((bh * L + t) * R + ro) * N; let kb = ((bh * L + s) * R + r) * N;
  var d = 0.0;
  for (var n = 0u; n < N; n++) { d += Q[qb + n] * K[kb + n]; }
  QK[i] = d;
}`;

// o_t,R[p] = D v_t,R[p] + sum_{s in chunk, s <= t} exp(c_t - c_s) w_s sum_r (q_t,R . k_s,r) v_s,r[p]
//            - corr_t sum_r (q_t,R . k_t,r) v_t,r[p] + exp(c_t) (S_in q_t,R)[p]
// params: BH L Tq R P N H has_D
export const m3_chunk_out = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> QK: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> Coef: array<f32>;
@group(0) @binding(5) var<storage, read> Sin: array<f32>;
@group(0) @binding(6) var<storage, read> Dp: array<f32>;
@group(0) @binding(7) var<storage, read_write> O: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let Tq = pu(2u); let R = pu(3u); let P = pu(4u); let N = pu(5u); let H = pu(6u);
  let n_ch = (L + Tq - 1u) / Tq;
  if (i >= pu(0u) * L * R * P) { return; }
  let p = i % P; let ro = (i / P) % R; let t = (i / (P * R)) % L; let bh = i / (P * R * L);
  let ch = t / Tq; let s0 = ch * Tq;
  let qb = ((bh * L + t) * R + ro) * N;
  let qrow = (((bh * L + t) * R + ro) * Tq) * R;  // QK row of (t, ro)
  let ct = Coef[(bh * L + t) * 3u];
  var acc = 0.0;
  if (pu(7u) != 0u) { acc = Dp[bh % H] * V[i]; }
  for (var s = s0; s <= t; s++) {
    let e = decay(ct - Coef[(bh * L + s) * 3u]) * Coef[(bh * L + s) * 3u + 1u];
    for (var r = 0u; r < R; r++) {
      acc += e * QK[qrow + (s - s0) * R + r] * V[((bh * L + s) * R + r) * P + p];
    }
  }
  let corr = Coef[(bh * L + t) * 3u + 2u];
  for (var r = 0u; r < R; r++) {
    acc -= corr * QK[qrow + (t - s0) * R + r] * V[((bh * L + t) * R + r) * P + p];
  }
  let sb = ((bh * n_ch + ch) * P + p) * N;
  var sc = 0.0;
  for (var n = 0u; n < N; n++) { sc += Sin[sb + n] * Q[qb + n]; }
  O[i] = acc + decay(ct) * sc;
}`;

// k_prev, v_prev <- the k and v of the last step. params: BH L R N P
export const m3_finish = /* wgsl */ `
@group(0) @binding(1) var<storage, read> K: array<f32>;
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read_write> Prev: array<f32>;
${ENTRY_1D}
  let BH = pu(0u); let L = pu(1u); let R = pu(2u); let N = pu(3u); let P = pu(4u);
  if (i >= BH * R * (N + P)) { return; }
  if (i < BH * R * N) {
    let bh = i / (R * N); let e = i % (R * N);
    Prev[i] = K[(bh * L + L - 1u) * R * N + e];
  } else {
    let j = i - BH * R * N;
    let bh = j / (R * P); let e = j % (R * P);
    Prev[i] = V[(bh * L + L - 1u) * R * P + e];
  }
}`;

// One decode step (L = 1) per (sequence, head, channel p), the state in place:
// S = alpha S + beta sum_r v_prev,r k_prev,r^T + gamma sum_r v_r k_r^T,
// o_r = S q_r + D v_r. m3_finish then moves k, v into Prev.
// params: BH H R P N has_D
export const m3_step = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> Dal: array<f32>;
@group(0) @binding(5) var<storage, read> Dp: array<f32>;
@group(0) @binding(6) var<storage, read_write> O: array<f32>;
@group(0) @binding(7) var<storage, read_write> Ssm: array<f32>;
@group(0) @binding(8) var<storage, read> Prev: array<f32>;
${ENTRY_1D}
  let BH = pu(0u); let H = pu(1u); let R = pu(2u); let P = pu(3u); let N = pu(4u);
  if (i >= BH * P) { return; }
  let p = i % P; let bh = i / P;
  let dt = Dal[bh * 3u]; let A = Dal[bh * 3u + 1u]; let lam = Dal[bh * 3u + 2u];
  let alpha = exp(A * dt);
  let beta = (1.0 - lam) * dt * alpha;
  let gamma = lam * dt;
  let vp = BH * R * N + bh * R * P;
  for (var n = 0u; n < N; n++) {
    var u = 0.0;
    for (var r = 0u; r < R; r++) {
      u += beta * Prev[vp + r * P + p] * Prev[(bh * R + r) * N + n] +
           gamma * V[(bh * R + r) * P + p] * K[(bh * R + r) * N + n];
    }
    let at = (bh * P + p) * N + n;
    Ssm[at] = alpha * Ssm[at] + u;
  }
  for (var r = 0u; r < R; r++) {
    var acc = 0.0;
    if (pu(5u) != 0u) { acc = Dp[bh % H] * V[(bh * R + r) * P + p]; }
    for (var n = 0u; n < N; n++) { acc += Ssm[(bh * P + p) * N + n] * Q[(bh * R + r) * N + n]; }
    O[(bh * R + r) * P + p] = acc;
  }
}`;

// y[b, t, h P + p] = sum_r o'_r[p] SiLU(z[p] mimo_z_r[p]) mimo_o_r[p], with
// o' = RMSNorm_P(o_r) norm_h (is_outproj_norm) or o_r.
// params: B L H R P z_off z_ld y_off y_ld has_mimo has_norm eps
export const m3_output = /* wgsl */ `
@group(0) @binding(1) var<storage, read> O: array<f32>;
@group(0) @binding(2) var<storage, read> Z: array<f32>;
@group(0) @binding(3) var<storage, read> MimoZ: array<f32>;
@group(0) @binding(4) var<storage, read> MimoO: array<f32>;
@group(0) @binding(5) var<storage, read> Norm: array<f32>;
@group(0) @binding(6) var<storage, read_write> Y: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let H = pu(2u); let R = pu(3u); let P = pu(4u);
  if (i >= pu(0u) * L * H * P) { return; }
  let p = i % P; let h = (i / P) % H; let row = i / (P * H);
  let b = row / L; let t = row % L;
  let z = Z[pu(5u) + row * pu(6u) + h * P + p];
  var acc = 0.0;
  for (var r = 0u; r < R; r++) {
    let ob = (((b * H + h) * L + t) * R + r) * P;
    var on = O[ob + p];
    if (pu(10u) != 0u) {
      var ss = 0.0;
      for (var q = 0u; q < P; q++) { ss += O[ob + q] * O[ob + q]; }
      on = on / sqrt(ss / f32(P) + pf(11u)) * Norm[h * P + p];
    }
    let m = (h * R + r) * P + p;
    var mz = 1.0; var mo = 1.0;
    if (pu(9u) != 0u) { mz = MimoZ[m]; mo = MimoO[m]; }
    acc += on * silu(z * mz) * mo;
  }
  Y[pu(7u) + row * pu(8u) + h * P + p] = acc;
}`;
