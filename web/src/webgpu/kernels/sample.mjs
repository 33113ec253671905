// Token selection on the GPU, so that a decode step reads back one integer
// per sequence: the sampler of src/model/sampler.cpp (repetition penalty,
// temperature, top-k, top-p, min-p), one workgroup per sequence over the
// real (unpadded) vocabulary.

// The repetition penalty over each sequence's recent ids, each distinct id
// once: l > 0 ? l / penalty : l * penalty. params: B n_recent row_ld row_off penalty V
export const repeat_penalty = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> Logits: array<f32>;
@group(0) @binding(2) var<storage, read> Recent: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let b = wid.x; let n = pu(1u);
  for (var j = lid.x; j < n; j += 64u) {
    let id = Recent[b * n + j];
    var first = id < pu(5u);
    for (var i = 0u; i < j; i++) { if (Recent[b * n + i] == id) { first = false; } }
    if (first) {
      let at = pu(3u) + b * pu(2u) + id;
      let l = Logits[at];
      if (l > 0.0) { Logits[at] = l / pf(4u); } else { Logits[at] = l * pf(4u); }
    }
  }
}`;

// temperature <= 0: the argmax (ties to the lower id, as the engine).
// Otherwise, on l / T: top-k keeps the k largest, top-p the fewest largest
// whose mass reaches top_p of the top-k mass, min-p those with
// p / p_max >= min_p; the token is drawn from the kept ones in proportion to
// exp(l / T) by the Gumbel-max trick (argmax of l / T + Gumbel noise, the
// noise from a counter-based hash of (seed, step, sequence, id)). The k-th
// largest value and the top-p cut are found by bisection over the bits of
// the logits' order-preserving integer keys, 32 passes each, so that
// nothing is sorted. The random stream is not the CLI's (mt19937 on the
// host): sampled tokens follow the same distribution, not the same draws.
// params: B V row_ld row_off temperature seed step top_k top_p min_p
export const select_token = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> Tokens: array<u32>;
// Reductions with two barriers each (thread 0 folds the 64 partials):
// barriers are what a CPU implementation of WebGPU (SwiftShader) pays most for.
var<workgroup> red_f: array<f32, 64>;
var<workgroup> red_u: array<u32, 64>;
var<workgroup> res_f: f32;
var<workgroup> res_u: u32;
fn hash(x: u32) -> u32 {
  var h = x * 747796405u + 2891336453u;
  h = ((h >> ((h >> 28u) + 4u)) ^ h) * 277803737u;
  return (h >> 22u) ^ h;
}
// Unsigned keys in the order of the floats.
fn key(x: f32) -> u32 {
  let u = bitcast<u32>(x);
  if ((u & 0x80000000u) != 0u) { return ~u; }
  return u | 0x80000000u;
}
fn sum_f(v: f32, t: u32) -> f32 {
  red_f[t] = v;
  workgroupBarrier();
  if (t == 0u) {
    var s = 0.0;
    for (var i = 0u; i < 64u; i++) { s += red_f[i]; }
    res_f = s;
  }
  return workgroupUniformLoad(&res_f);
}
fn max_f(v: f32, t: u32) -> f32 {
  red_f[t] = v;
  workgroupBarrier();
  if (t == 0u) {
    var s = red_f[0];
    for (var i = 1u; i < 64u; i++) { s = max(s, red_f[i]); }
    res_f = s;
  }
  return workgroupUniformLoad(&res_f);
}
fn sum_u(v: u32, t: u32) -> u32 {
  red_u[t] = v;
  workgroupBarrier();
  if (t == 0u) {
    var s = 0u;
    for (var i = 0u; i < 64u; i++) { s += red_u[i]; }
    res_u = s;
  }
  return workgroupUniformLoad(&res_u);
}
// The id of the largest value (ties to the lower id) among the threads'
// candidates; written by thread 0.
fn write_best(v: f32, i: u32, t: u32, b: u32) {
  red_f[t] = v; red_u[t] = i;
  workgroupBarrier();
  if (t == 0u) {
    var bv = red_f[0]; var bi = red_u[0];
    for (var j = 1u; j < 64u; j++) {
      if (red_f[j] > bv || (red_f[j] == bv && red_u[j] < bi)) { bv = red_f[j]; bi = red_u[j]; }
    }
    Tokens[b] = bi;
  }
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let b = wid.x; let t = lid.x;
  let V = pu(1u); let temp = pf(4u);
  let row = pu(3u) + b * pu(2u);
  if (temp <= 0.0) {
    var bv = -3.4e38; var bi = 0xffffffffu;
    for (var v = t; v < V; v += 64u) {
      let x = Logits[row + v];
      if (x > bv) { bv = x; bi = v; }
    }
    write_best(bv, bi, t, b);
    return;
  }
  var lm = -3.4e38;
  for (var v = t; v < V; v += 64u) { lm = max(lm, Logits[row + v] / temp); }
  let lmax = max_f(lm, t);
  // The k-th largest key: the largest K with count(key >= K) >= k.
  var kk = 0u;
  let k = pu(7u);
  if (k > 0u && k < V) {
    for (var bit = 31i; bit >= 0i; bit--) {
      let cand = kk | (1u << u32(bit));
      var c = 0u;
      for (var v = t; v < V; v += 64u) { if (key(Logits[row + v] / temp) >= cand) { c += 1u; } }
      if (sum_u(c, t) >= k) { kk = cand; }
    }
  }
  // The top-p cut: the largest K >= kk whose mass reaches top_p of the top-k mass.
  var kp = kk;
  let top_p = pf(8u);
  if (top_p < 1.0) {
    var z = 0.0;
    for (var v = t; v < V; v += 64u) {
      let x = Logits[row + v] / temp;
      if (key(x) >= kk) { z += exp(x - lmax); }
    }
    let need = top_p * sum_f(z, t);
    var cut = 0u;
    for (var bit = 31i; bit >= 0i; bit--) {
      let cand = cut | (1u << u32(bit));
      let th = max(cand, kk);
      var m = 0.0;
      for (var v = t; v < V; v += 64u) {
        let x = Logits[row + v] / temp;
        if (key(x) >= th) { m += exp(x - lmax); }
      }
      if (sum_f(m, t) >= need) { cut = cand; }
    }
    kp = max(cut, kk);
  }
  var min_d = -3.4e38;
  if (pf(9u) > 0.0) { min_d = log(pf(9u)); }
  var bv = -3.4e38; var bi = 0xffffffffu;
  for (var v = t; v < V; v += 64u) {
    let x = Logits[row + v] / temp;
    if (key(x) < kp || x - lmax < min_d) { continue; }
    let r = hash(hash(hash(pu(5u)) ^ pu(6u)) ^ (v * 2654435761u + b));
    let u = (f32(r >> 8u) + 0.5) / 16777216.0;
    let g = x - log(-log(u));
    if (g > bv) { bv = g; bi = v; }
  }
  write_best(bv, bi, t, b);
}`;
