// In the page: the token selection kernels on fixed logits. Many draws of
// one distribution (each row of a batch gets its own noise), counted per
// id, and the kept set and probabilities the engine's sampler defines,
// computed here in double, for the node test to compare.
import { Gpu, requestGpuDevice } from '/web/src/webgpu/gpu.mjs';
import * as ops from '/web/src/webgpu/ops.mjs';

// A fixed pseudo-random row (mulberry32), values spread like logits.
function row(V, seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return Float32Array.from({ length: V }, () => (next() - 0.5) * 8);
}

// The engine's distribution (src/model/sampler.cpp) over ids, in double.
function expected(l, { temperature, topK, topP, minP }) {
  const V = l.length, x = Array.from(l, (v) => Math.fround(v / temperature));
  const order = [...x.keys()].sort((a, b) => x[b] - x[a] || a - b);
  const lmax = x[order[0]], w = (i) => Math.exp(x[i] - lmax);
  const k = topK > 0 ? Math.min(topK, V) : V;
  let n = k;
  if (topP < 1) {
    let z = 0;
    for (let i = 0; i < k; ++i) z += w(order[i]);
    const need = topP * z;
    let before = 0;
    for (let i = 0; i < k; ++i) {
      if (before >= need) { n = i; break; }
      before += w(order[i]);
    }
  }
  const minD = minP > 0 ? Math.log(minP) : -Infinity;
  const kept = order.slice(0, n).filter((i) => x[i] - lmax >= minD);
  const total = kept.reduce((s, i) => s + w(i), 0);
  const p = new Array(V).fill(0);
  for (const i of kept) p[i] = w(i) / total;
  return p;
}

export async function run() {
  const gpu = new Gpu(await requestGpuDevice());
  const V = 50, B = Number(new URL(import.meta.url).searchParams.get("B") || 2048), l = row(V, 7);
  const all = new Float32Array(B * V);
  for (let b = 0; b < B; ++b) all.set(l, b * V);
  const logits = gpu.upload(all), tokens = gpu.zeros(B);
  const cases = [
    { temperature: 1, topK: 0, topP: 1, minP: 0 },
    { temperature: 0.7, topK: 5, topP: 1, minP: 0 },
    { temperature: 1.3, topK: 0, topP: 0.6, minP: 0 },
    { temperature: 1, topK: 20, topP: 0.9, minP: 0.05 },
    { temperature: 1, topK: 1, topP: 1, minP: 0 },
    { temperature: 2, topK: 0, topP: 1e-6, minP: 0 },
  ];
  const out = [];
  for (const [i, c] of cases.entries()) {
    ops.selectToken(gpu, { logits, tokens, B, V, rowLd: V, seed: 1234 + i, step: 3, ...c });
    const ids = new Uint32Array(await gpu.read(tokens, 0, B * 4));
    const counts = new Array(V).fill(0);
    for (const id of ids) counts[id] = (counts[id] || 0) + 1;
    out.push({ options: c, counts, expected: expected(l, c), draws: B });
  }
  // Greedy, and the repetition penalty against its formula.
  ops.selectToken(gpu, { logits, tokens, B: 1, V, rowLd: V, temperature: 0 });
  const greedy = new Uint32Array(await gpu.read(tokens, 0, 4))[0];
  let argmax = 0;
  for (let i = 1; i < V; ++i) if (l[i] > l[argmax]) argmax = i;
  const pen = gpu.upload(l), recent = [3, 9, 3, 49, 60, 9, 0];
  ops.repeatPenalty(gpu, { logits: pen, recent: gpu.upload(Uint32Array.from(recent)), B: 1, n: recent.length, V, rowLd: V,
    penalty: 1.3 });
  const got = await gpu.readF32(pen);
  const want = Float32Array.from(l);
  for (const id of new Set(recent)) if (id < V) want[id] = want[id] > 0 ? want[id] / 1.3 : want[id] * 1.3;
  return { cases: out, greedy, argmax, penaltyMaxDiff: Math.max(...got.map((v, i) => Math.abs(v - want[i]))) };
}
