// Causal grouped-query attention with a KV cache (docs/MATH.md §4).
import { ENTRY_1D } from './common.mjs';

// Per (sequence, step, head slot) of qkv rows [q (H heads) | k (Hkv) | v (Hkv)]:
// rotary on the first 2*half channels of q and k (channel i with i + half,
// angle pos * inv_freq[i], pos = past + t), in place; the k and v heads are
// then appended to the caches (B, Hkv, cap, hd) at pos.
// params: B L H Hkv hd past cap half
export const att_append = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> QKV: array<f32>;
@group(0) @binding(2) var<storage, read_write> KC: array<f32>;
@group(0) @binding(3) var<storage, read_write> VC: array<f32>;
@group(0) @binding(4) var<storage, read> InvFreq: array<f32>;
${ENTRY_1D}
  let L = pu(1u); let H = pu(2u); let Hkv = pu(3u); let hd = pu(4u); let half = pu(7u);
  let slots = H + Hkv;
  if (i >= pu(0u) * L * slots) { return; }
  let slot = i % slots; let t = (i / slots) % L; let b = i / (slots * L);
  let pos = pu(5u) + t;
  let row = (b * L + t) * (H + 2u * Hkv) * hd;
  let base = row + slot * hd;
  for (var e = 0u; e < half; e++) {
    let sc = sincos(f32(pos) * InvFreq[e]);
    let c = sc.y; let s = sc.x;
    let x0 = QKV[base + e]; let x1 = QKV[base + e + half];
    QKV[base + e] = x0 * c - x1 * s;
    QKV[base + e + half] = x0 * s + x1 * c;
  }
  if (slot >= H) {
    let j = slot - H;
    let dst = ((b * Hkv + j) * pu(6u) + pos) * hd;
    let vsrc = row + (H + Hkv + j) * hd;
    for (var e = 0u; e < hd; e++) {
      KC[dst + e] = QKV[base + e];
      VC[dst + e] = QKV[vsrc + e];
    }
  }
}`;

// One workgroup per (sequence, step, query head): scores against the
// past + t + 1 cached keys into Scratch, softmax, the weighted sum of values.
// params: B L H Hkv hd past cap scale max_keys
export const att_softmax = /* wgsl */ `
@group(0) @binding(1) var<storage, read> QKV: array<f32>;
@group(0) @binding(2) var<storage, read> KC: array<f32>;
@group(0) @binding(3) var<storage, read> VC: array<f32>;
@group(0) @binding(4) var<storage, read_write> Out: array<f32>;
@group(0) @binding(5) var<storage, read_write> Scratch: array<f32>;
var<workgroup> red: array<f32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let task = wid.y * nwg.x + wid.x;
  let L = pu(1u); let H = pu(2u); let Hkv = pu(3u); let hd = pu(4u); let cap = pu(6u);
  if (task >= pu(0u) * L * H) { return; }
  let h = task % H; let t = (task / H) % L; let b = task / (H * L);
  let j = h / (H / Hkv);
  let n = pu(5u) + t + 1u;
  let q = (b * L + t) * (H + 2u * Hkv) * hd + h * hd;
  let kv = (b * Hkv + j) * cap * hd;
  let sc = task * pu(8u);
  var mx = -3.4e38;
  for (var s = lid.x; s < n; s += 64u) {
    var d = 0.0;
    for (var e = 0u; e < hd; e++) { d += QKV[q + e] * KC[kv + s * hd + e]; }
    d = d * pf(7u);
    Scratch[sc + s] = d;
    mx = max(mx, d);
  }
  red[lid.x] = mx;
  workgroupBarrier();
  for (var w = 32u; w > 0u; w >>= 1u) {
    if (lid.x < w) { red[lid.x] = max(red[lid.x], red[lid.x + w]); }
    workgroupBarrier();
  }
  mx = red[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var s = lid.x; s < n; s += 64u) {
    let e = exp(Scratch[sc + s] - mx);
    Scratch[sc + s] = e;
    sum += e;
  }
  red[lid.x] = sum;
  storageBarrier();
  workgroupBarrier();
  for (var w = 32u; w > 0u; w >>= 1u) {
    if (lid.x < w) { red[lid.x] += red[lid.x + w]; }
    workgroupBarrier();
  }
  let total = red[0];
  for (var e = lid.x; e < hd; e += 64u) {
    var acc = 0.0;
    for (var s = 0u; s < n; s++) { acc += Scratch[sc + s] * VC[kv + s * hd + e]; }
    Out[(b * L + t) * H * hd + h * hd + e] = acc / total;
  }
}`;

// Copies the first `len` positions of a (B, Hkv, cap, hd) cache into one of
// capacity cap2 (growing it, or trimming it for a state file).
// params: B Hkv len hd cap cap2
export const kv_copy = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Src: array<f32>;
@group(0) @binding(2) var<storage, read_write> Dst: array<f32>;
${ENTRY_1D}
  let Hkv = pu(1u); let len = pu(2u); let hd = pu(3u);
  if (i >= pu(0u) * Hkv * len * hd) { return; }
  let e = i % hd; let s = (i / hd) % len; let bj = i / (hd * len);
  Dst[(bj * pu(5u) + s) * hd + e] = Src[(bj * pu(4u) + s) * hd + e];
}`;
