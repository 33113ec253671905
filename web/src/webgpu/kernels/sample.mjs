// Token selection on the GPU, so that a decode step reads back one integer
// per sequence. One workgroup per sequence over the real (unpadded) vocabulary.
//   temperature 0: argmax (ties to the lower id, as the engine's sampler);
//   temperature T > 0: the Gumbel-max trick, argmax(logit / T + G) with G
//   standard Gumbel noise from a counter-based hash of (seed, step, id), which
//   draws from softmax(logits / T).
// params: B V row_ld row_off temperature seed step
export const select_token = /* wgsl */ `
@group(0) @binding(1) var<storage, read> Logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> Tokens: array<u32>;
var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;
fn hash(x: u32) -> u32 {
  var h = x * 747796405u + 2891336453u;
  h = ((h >> ((h >> 28u) + 4u)) ^ h) * 277803737u;
  return (h >> 22u) ^ h;
}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let b = wid.x;
  let V = pu(1u); let temp = pf(4u);
  let row = pu(3u) + b * pu(2u);
  var bv = -3.4e38; var bi = 0xffffffffu;
  for (var v = lid.x; v < V; v += 256u) {
    var x = Logits[row + v];
    if (temp > 0.0) {
      let r = hash(hash(hash(pu(5u)) ^ pu(6u)) ^ (v * 2654435761u + b));
      let u = (f32(r >> 8u) + 0.5) / 16777216.0;
      x = x / temp - log(-log(u));
    }
    if (x > bv) { bv = x; bi = v; }
  }
  best_v[lid.x] = bv; best_i[lid.x] = bi;
  workgroupBarrier();
  for (var w = 128u; w > 0u; w >>= 1u) {
    if (lid.x < w) {
      let ov = best_v[lid.x + w]; let oi = best_i[lid.x + w];
      if (ov > best_v[lid.x] || (ov == best_v[lid.x] && oi < best_i[lid.x])) {
        best_v[lid.x] = ov; best_i[lid.x] = oi;
      }
    }
    workgroupBarrier();
  }
  if (lid.x == 0u) { Tokens[b] = best_i[0]; }
}`;
