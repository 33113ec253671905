// Projections, norms, the embedding lookup: the dense ops every model runs.
import { ENTRY_1D } from './common.mjs';

// The bindings of linear and linear_rows, and their write of one output:
// y[row, col] = v + bias[col] (when has_bias), stored or added to y (when
// accumulate).  params: ... y_off y_ld has_bias accumulate (5..8)
const LINEAR_IO = /* wgsl */ `
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> W: array<f32>;
@group(0) @binding(3) var<storage, read> Bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
fn store_y(row: u32, col: u32, acc: f32) {
  var v = acc;
  if (pu(7u) != 0u) { v += Bias[col]; }
  let at = pu(5u) + row * pu(6u) + col;
  if (pu(8u) != 0u) { Y[at] = Y[at] + v; } else { Y[at] = v; }
}`;

// y[r, o] (+)= sum_i x[r, i] W[o, i] + bias[o]: a Linear with W stored
// (out, in). A workgroup of 16 x 16 threads makes a 32 x 64 tile of y, each
// thread 2 rows x 4 columns (columns 16 apart); each step stages 32 columns
// of x and W in workgroup memory, so that every value loaded is used 64 or
// 32 times, and barriers (costly on a CPU adapter) come once per 32 of K.
// params: M N K x_off x_ld y_off y_ld has_bias accumulate
export const linear = /* wgsl */ `
${LINEAR_IO}
var<workgroup> xs: array<array<f32, 33>, 32>;
var<workgroup> ws: array<array<f32, 33>, 64>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let M = pu(0u); let N = pu(1u); let K = pu(2u);
  let x_off = pu(3u); let x_ld = pu(4u);
  let tid = lid.y * 16u + lid.x;
  let row0 = wid.y * 32u; let col0 = wid.x * 64u;
  var acc: array<array<f32, 4>, 2>;
  for (var k0 = 0u; k0 < K; k0 += 32u) {
    for (var q = 0u; q < 4u; q++) {
      let idx = tid + 256u * q;
      let r = idx / 32u; let k = k0 + idx % 32u;
      var v = 0.0;
      if (row0 + r < M && k < K) { v = X[x_off + (row0 + r) * x_ld + k]; }
      xs[r][idx % 32u] = v;
    }
    for (var q = 0u; q < 8u; q++) {
      let idx = tid + 256u * q;
      let n = idx / 32u; let k = k0 + idx % 32u;
      var v = 0.0;
      if (col0 + n < N && k < K) { v = W[(col0 + n) * K + k]; }
      ws[n][idx % 32u] = v;
    }
    workgroupBarrier();
    for (var k = 0u; k < 32u; k++) {
      let a0 = xs[lid.y * 2u][k]; let a1 = xs[lid.y * 2u + 1u][k];
      for (var j = 0u; j < 4u; j++) {
        let w = ws[lid.x + 16u * j][k];
        acc[0][j] += a0 * w;
        acc[1][j] += a1 * w;
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 2u; i++) {
    let row = row0 + lid.y * 2u + i;
    for (var j = 0u; j < 4u; j++) {
      let col = col0 + lid.x + 16u * j;
      if (row < M && col < N) {
        store_y(row, col, acc[i][j]);
      }
    }
  }
}`;

// The same for a few rows (decode): one workgroup per (row, 64 outputs),
// each thread one output, the row of x staged in workgroup memory in pieces.
// params: M N K x_off x_ld y_off y_ld has_bias accumulate
export const linear_rows = /* wgsl */ `
${LINEAR_IO}
var<workgroup> xs: array<f32, 256>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let N = pu(1u); let K = pu(2u);
  let row = wid.y;
  let col = wid.x * 64u + lid.x;
  let xb = pu(3u) + row * pu(4u);
  var acc = 0.0;
  for (var k0 = 0u; k0 < K; k0 += 256u) {
    for (var j = lid.x; j < 256u; j += 64u) {
      var v = 0.0;
      if (k0 + j < K) { v = X[xb + k0 + j]; }
      xs[j] = v;
    }
    workgroupBarrier();
    if (col < N) {
      let end = min(256u, K - k0);
      let wb = col * K + k0;
      for (var j = 0u; j < end; j++) { acc += xs[j] * W[wb + j]; }
    }
    workgroupBarrier();
  }
  if (col < N) { store_y(row, col, acc); }
}`;

// out[r, :] = E[ids[r], :] * scale, for the ids in [r0, r1) this piece of
// E (its rows r0..r1) holds.  params: rows D scale r0 r1
export const embedding = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Ids: array<u32>;
@group(0) @binding(2) var<storage, read> E: array<f32>;
@group(0) @binding(3) var<storage, read_write> Out: array<f32>;
${ENTRY_1D}
  let D = pu(1u);
  if (i >= pu(0u) * D) { return; }
  let id = Ids[i / D];
  if (id < pu(3u) || id >= pu(4u)) { return; }
  Out[i] = E[(id - pu(3u)) * D + i % D] * pf(2u);
}`;

const REDUCE = /* wgsl */ `
var<workgroup> red: array<f32, 64>;
fn reduce_sum(v: f32, t: u32) -> f32 {
  red[t] = v;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] += red[t + s]; }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}`;

// RMSNorm of runs of n channels: one workgroup per (row, run).
// params: rows n runs x_off x_ld o_off o_ld has_w eps
export const rms_norm = /* wgsl */ `
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> Wt: array<f32>;
@group(0) @binding(3) var<storage, read_write> Out: array<f32>;
${REDUCE}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let task = wid.y * nwg.x + wid.x;
  let n = pu(1u); let runs = pu(2u);
  if (task >= pu(0u) * runs) { return; }
  let row = task / runs; let run = task % runs;
  let xb = pu(3u) + row * pu(4u) + run * n;
  let ob = pu(5u) + row * pu(6u) + run * n;
  var ss = 0.0;
  for (var j = lid.x; j < n; j += 64u) { let v = X[xb + j]; ss += v * v; }
  let r = 1.0 / sqrt(reduce_sum(ss, lid.x) / f32(n) + pf(8u));
  for (var j = lid.x; j < n; j += 64u) {
    var w = 1.0;
    if (pu(7u) != 0u) { w = Wt[run * n + j]; }
    Out[ob + j] = X[xb + j] * r * w;
  }
}`;

// The gated norm of Mamba-2's output (and the MLP's plain gate):
//   has_w, gate first:  out = RMSNorm_n(y SiLU(z)) w
//   has_w, norm first:  out = RMSNorm_n(y) w SiLU(z)
//   no w:               out = y SiLU(z)
// One workgroup per (row, group of n channels).
// params: rows n runs y_off y_ld z_off z_ld o_off o_ld has_w norm_before_gate eps
export const gated_rms_norm = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Yb: array<f32>;
@group(0) @binding(2) var<storage, read> Zb: array<f32>;
@group(0) @binding(3) var<storage, read> Wt: array<f32>;
@group(0) @binding(4) var<storage, read_write> Out: array<f32>;
${REDUCE}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let task = wid.y * nwg.x + wid.x;
  let n = pu(1u); let runs = pu(2u);
  if (task >= pu(0u) * runs) { return; }
  let row = task / runs; let run = task % runs;
  let yb = pu(3u) + row * pu(4u) + run * n;
  let zb = pu(5u) + row * pu(6u) + run * n;
  let ob = pu(7u) + row * pu(8u) + run * n;
  let has_w = pu(9u) != 0u; let nbg = pu(10u) != 0u;
  var ss = 0.0;
  for (var j = lid.x; j < n; j += 64u) {
    var v = Yb[yb + j];
    if (!(has_w && nbg)) { v = v * silu(Zb[zb + j]); }
    ss += v * v;
  }
  var r = 1.0;
  if (has_w) { r = 1.0 / sqrt(reduce_sum(ss, lid.x) / f32(n) + pf(11u)); }
  for (var j = lid.x; j < n; j += 64u) {
    let g = silu(Zb[zb + j]);
    var v = Yb[yb + j];
    if (!has_w) { v = v * g; }
    else if (nbg) { v = v * r * Wt[run * n + j] * g; }
    else { v = v * g * r * Wt[run * n + j]; }
    Out[ob + j] = v;
  }
}`;

// x[i] *= s over a column block of rows.  params: rows cols off ld s
export const scale_cols = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
${ENTRY_1D}
  let cols = pu(1u);
  if (i >= pu(0u) * cols) { return; }
  let at = pu(2u) + (i / cols) * pu(3u) + i % cols;
  X[at] = X[at] * pf(4u);
}`;
