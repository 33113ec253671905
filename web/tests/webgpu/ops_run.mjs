// In the page: runs each op case written by ssm_webgpu_op_cases (the ref
// backend's inputs and outputs) through the WebGPU kernels of ops.mjs and
// returns, per output, max |webgpu - ref| / max |ref|.
import { Gpu, requestGpuDevice } from '/web/src/webgpu/gpu.mjs';
import * as ops from '/web/src/webgpu/ops.mjs';
import { parseSafetensors } from '/web/src/webgpu/safetensors.mjs';

function relErr(got, want) {
  let d = 0, m = 0;
  for (let i = 0; i < want.length; ++i) {
    const e = Math.abs(got[i] - want[i]);
    d = Number.isNaN(e) ? Infinity : Math.max(d, e);
    m = Math.max(m, Math.abs(want[i]));
  }
  return m > 0 ? d / m : d;
}

// Interleaves equal-length arrays: [a0, b0, c0, a1, ...].
function interleave(...xs) {
  const out = new Float32Array(xs[0].length * xs.length);
  xs.forEach((x, j) => x.forEach((v, i) => { out[i * xs.length + j] = v; }));
  return out;
}
function strided(all, n, stride, at) {
  const out = new Float32Array(n);
  for (let i = 0; i < n; ++i) out[i] = all[i * stride + at];
  return out;
}

const RUN = {
  async linear(gpu, p, t, up) {
    const y = up(t['in.y']);
    ops.linear(gpu, { x: up(t['in.x']), W: up(t['in.W']), bias: t['in.bias'] ? up(t['in.bias']) : null, y,
      M: p.M, N: p.N, K: p.K, accumulate: p.accumulate });
    return { y: await gpu.readF32(y) };
  },
  async rms_norm(gpu, p, t, up) {
    const out = gpu.zeros(p.rows * p.D);
    ops.rmsNorm(gpu, { x: up(t['in.x']), w: up(t['in.w']), out, rows: p.rows, n: p.D, eps: p.eps });
    return { out: await gpu.readF32(out) };
  },
  async gated_rms_norm(gpu, p, t, up) {
    const out = gpu.zeros(p.rows * p.D);
    ops.gatedRmsNorm(gpu, { y: up(t['in.y']), z: up(t['in.z']), w: t['in.w'] ? up(t['in.w']) : null, out, rows: p.rows,
      n: p.group, runs: p.D / p.group, eps: p.eps, normBeforeGate: p.norm_before_gate });
    return { out: await gpu.readF32(out) };
  },
  async conv1d(gpu, p, t, up) {
    const out = gpu.zeros(p.B * p.L * p.C), state = up(t['in.state']);
    ops.conv1d(gpu, { input: up(t['in.in']), weight: up(t['in.weight']), bias: t['in.bias'] ? up(t['in.bias']) : null,
      state, out, B: p.B, L: p.L, C: p.C, K: p.K, silu: p.silu });
    return { out: await gpu.readF32(out), state: await gpu.readF32(state) };
  },
  async ssd_prepare(gpu, p, t, up) {
    const dt = gpu.zeros(p.rows * p.H), A = gpu.zeros(p.H);
    ops.ssdPrepare(gpu, { dtRaw: up(t['in.dt_raw']), dtBias: up(t['in.dt_bias']), Alog: up(t['in.A_log']), dt, A,
      rows: p.rows, H: p.H, dtMin: p.dt_min, dtMax: p.dt_max >= 1e29 ? Infinity : p.dt_max });
    return { dt: await gpu.readF32(dt), A: await gpu.readF32(A) };
  },
  async ssd_scan(gpu, p, t, up) {
    const HP = p.H * p.P, GN = p.G * p.N, y = gpu.zeros(p.B * p.L * HP), state = up(t['in.state']);
    ops.ssdScan(gpu, { xbc: up(t['in.xbc']), xOff: 0, bOff: HP, cOff: HP + GN, ld: HP + 2 * GN, dt: up(t['in.dt']),
      A: up(t['in.A']), D: t['in.D'] ? up(t['in.D']) : null, y, state, B: p.B, L: p.L, H: p.H, P: p.P, G: p.G, N: p.N, Q: p.Q });
    return { y: await gpu.readF32(y), state: await gpu.readF32(state) };
  },
  async mamba3_prepare(gpu, p, t, up) {
    const { B, L, H, G, R, P, N, S } = p, proj = t['in.proj'];
    const z = (n) => gpu.zeros(Math.max(n, 1));
    const a = { dal: z(B * H * L * 3), phases: z(B * H * L * S), bn: z(B * L * R * G * N), cn: z(B * L * R * G * N),
      q: z(B * H * L * R * N), k: z(B * H * L * R * N), v: z(B * H * L * R * P), phase: up(t['in.phase']) };
    ops.mamba3Prepare(gpu, { proj: up(proj), ld: proj.shape[2], cols: p.cols, B, L, H, G, R, P, N, S, halves: p.halves,
      Afloor: p.A_floor, eps: p.eps, dtBias: up(t['in.dt_bias']), Bnorm: up(t['in.B_norm']), Cnorm: up(t['in.C_norm']),
      Bbias: up(t['in.B_bias']), Cbias: up(t['in.C_bias']), mimoX: t['in.mimo_x'] ? up(t['in.mimo_x']) : null, ...a });
    const dal = await gpu.readF32(a.dal), n = B * H * L;
    return { phase: await gpu.readF32(a.phase, 0, B * H * S), B_normed: await gpu.readF32(a.bn), C_normed: await gpu.readF32(a.cn),
      dt: strided(dal, n, 3, 0), A: strided(dal, n, 3, 1), lam: strided(dal, n, 3, 2),
      q: await gpu.readF32(a.q), k: await gpu.readF32(a.k), v: await gpu.readF32(a.v) };
  },
  async mamba3_scan(gpu, p, t, up) {
    const { B, H, L, R, P, N } = p;
    const kp = t['in.k_prev'].data, vp = t['in.v_prev'].data;
    const prevHost = new Float32Array(kp.length + vp.length);
    prevHost.set(kp);
    prevHost.set(vp, kp.length);
    const prev = gpu.upload(prevHost), ssm = up(t['in.ssm']), o = gpu.zeros(B * H * L * R * P);
    ops.mamba3Scan(gpu, { q: up(t['in.q']), k: up(t['in.k']), v: up(t['in.v']),
      dal: gpu.upload(interleave(t['in.dt'].data, t['in.A'].data, t['in.lam'].data)), D: t['in.D'] ? up(t['in.D']) : null,
      o, ssm, prev, B, H, L, R, P, N, chunk: p.chunk });
    const pr = await gpu.readF32(prev);
    return { o: await gpu.readF32(o), ssm: await gpu.readF32(ssm), k_prev: pr.subarray(0, kp.length), v_prev: pr.subarray(kp.length) };
  },
  async mamba3_output(gpu, p, t, up) {
    const { B, L, H, R, P } = p, y = gpu.zeros(B * L * H * P);
    const opt = (n) => (t[n] ? up(t[n]) : null);
    ops.mamba3Output(gpu, { o: up(t['in.o']), z: { buf: up(t['in.z']), off: p.z_off, ld: p.z_ld }, mimoZ: opt('in.mimo_z'),
      mimoO: opt('in.mimo_o'), norm: opt('in.norm'), eps: p.eps, y, B, L, H, R, P });
    return { y: await gpu.readF32(y) };
  },
  async attention(gpu, p, t, up) {
    const { B, L, H, Hkv, hd } = p, out = gpu.zeros(B * L * H * hd);
    const kCache = up(t['in.k_cache']), vCache = up(t['in.v_cache']);
    ops.attention(gpu, { qkv: up(t['in.qkv']), kCache, vCache, invFreq: p.rot ? up(t['in.inv_freq']) : null,
      rotHalf: p.rot / 2, out, B, L, H, Hkv, hd, past: p.past, cap: p.cap, scale: p.scale });
    return { out: await gpu.readF32(out), k_cache: await gpu.readF32(kCache), v_cache: await gpu.readF32(vCache) };
  },
};

export async function run(dir) {
  const files = await (await fetch(`${dir}/index.json`)).json();
  const gpu = new Gpu(await requestGpuDevice());
  const results = [];
  for (const file of files) {
    const r = await fetch(`${dir}/${file}`);
    if (!r.ok) throw new Error(`${file}: HTTP ${r.status}`);
    const t = parseSafetensors(await r.arrayBuffer(), file);
    const op = t.__metadata__.op, p = JSON.parse(t.__metadata__.params);
    if (!RUN[op]) throw new Error(`${file}: no webgpu runner for op '${op}'`);
    const up = (x) => gpu.upload(x.data);
    const got = await RUN[op](gpu, p, t, up);
    const errs = {};
    for (const [name, want] of Object.entries(t)) {
      if (!name.startsWith('out.')) continue;
      const g = got[name.slice(4)];
      if (!g) throw new Error(`${file}: the webgpu runner gave no '${name.slice(4)}'`);
      if (g.length < want.data.length) throw new Error(`${file}: '${name}' has ${g.length} values, ref ${want.data.length}`);
      errs[name.slice(4)] = relErr(g, want.data);
    }
    results.push({ file, op, params: p, errs });
  }
  return results;
}
