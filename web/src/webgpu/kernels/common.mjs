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
