// What every WGSL kernel starts with: the parameter block, the 1-D thread
// index, and the scalar functions in the numerically stable forms the engine
// uses (src/ops/scalar_math.h).
export const HEADER = /* wgsl */ `
struct Params { v: array<vec4<u32>, 8> };
@group(0) @binding(0) var<uniform> params: Params;
fn pu(i: u32) -> u32 { return params.v[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }
fn gid(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 { return (wid.y * nwg.x + wid.x) * 64u + lid.x; }
fn sigmoid(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}
fn silu(x: f32) -> f32 { return x * sigmoid(x); }
// log(1 + x) without the cancellation of log(1 + small x).
fn log1p_(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  return log(u) * x / (u - 1.0);
}
fn softplus(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  if (x < -20.0) { return exp(x); }
  return log1p_(exp(x));
}
// sin and cos to float32 accuracy. The built-in ones may be approximations
// (SwiftShader's are off by up to 2e-4, enough to move logits by 1e-4):
// reduce by multiples of pi/2 (pi/2 split in two parts so that the reduction
// is exact for moderate x), then Taylor polynomials on [-pi/4, pi/4].
fn sincos(x: f32) -> vec2<f32> {
  let k = round(x * 0.6366197723675814);
  let r = (x - k * 1.5707963705062866) + k * 4.371139000186243e-8;
  let r2 = r * r;
  let s = r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0)))));
  let c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0)))));
  let q = i32(k) & 3;
  if (q == 0) { return vec2<f32>(s, c); }
  if (q == 1) { return vec2<f32>(c, -s); }
  if (q == 2) { return vec2<f32>(-s, -c); }
  return vec2<f32>(-c, s);
}
// A decay exp(x), x <= 0, flushed to zero below e^-80 as docs/MATH.md §2 says.
fn decay(x: f32) -> f32 {
  if (x < -80.0) { return 0.0; }
  return exp(x);
}
`;

// The entry point of a 1-D kernel of WG = 64 threads per workgroup.
export const ENTRY_1D = /* wgsl */ `@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = gid(wid, nwg, lid);`;
