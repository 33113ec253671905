// In the page: prefill and decode speed of a model of a given shape with
// random weights (nothing is checked but that it runs), for bench.mjs.
import { WebGpuModel, load } from '/web/src/webgpu/model.mjs';

function randomTensors(config, seed = 1) {
  let a = seed >>> 0;
  const fill = (n, scale) => {
    const x = new Float32Array(n);
    for (let i = 0; i < n; ++i) {
      a = (Math.imul(a, 1664525) + 1013904223) >>> 0;
      x[i] = ((a >>> 8) / 16777216 - 0.5) * 2 * scale;
    }
    return x;
  };
  const D = config.d_model, s = config.ssm_cfg, t = {};
  const add = (name, shape, scale = 0.02) => { t[name] = { shape, data: fill(shape.reduce((p, q) => p * q, 1), scale) }; };
  const V = Math.ceil(config.vocab_size / 8) * 8, di = s.expand * D, H = di / s.headdim;
  add('backbone.embedding.weight', [V, D]);
  add('backbone.norm_f.weight', [D], 1);
  for (let i = 0; i < config.n_layer; ++i) {
    const p = `backbone.layers.${i}.`, m = p + 'mixer.', conv = di + 2 * s.ngroups * s.d_state;
    add(p + 'norm.weight', [D], 1);
    add(m + 'in_proj.weight', [2 * di + 2 * s.ngroups * s.d_state + H, D]);
    add(m + 'conv1d.weight', [conv, 1, s.d_conv], 0.3);
    add(m + 'conv1d.bias', [conv], 0.1);
    add(m + 'dt_bias', [H], 1);
    add(m + 'A_log', [H], 1);
    add(m + 'D', [H], 1);
    add(m + 'norm.weight', [di], 1);
    add(m + 'out_proj.weight', [D, di]);
  }
  return t;
}

// A model directory served under /extra/ (model: true), or random weights of `config`.
export async function run({ config, model: fromDir = false, prefill = 64, decode = 16 }) {
  let model;
  if (fromDir) {
    const get = async (n) => (await fetch(`/extra/${n}`)).arrayBuffer();
    model = await load({ 'config.json': await get('config.json'), 'model.safetensors': await get('model.safetensors') });
    config = { vocab_size: model.cfg.vocab };
  } else {
    model = await WebGpuModel.load({ config, tensors: randomTensors(config) });
  }
  const ids = Array.from({ length: prefill }, (_, i) => (i * 7919) % config.vocab_size);
  // A warm-up compiles every pipeline.
  await model.generate(ids.slice(0, 8), { maxTokens: 2, temperature: 0 });
  model.reset(1);
  let t0 = performance.now();
  await model.next(ids, 1, prefill, { temperature: 0 });
  const prefillS = (performance.now() - t0) / 1000;
  t0 = performance.now();
  for (let i = 0; i < decode; ++i) await model.next(model.tokens, 1, 1, { temperature: 0 });
  const decodeS = (performance.now() - t0) / 1000;
  return { prefillTokensPerS: prefill / prefillS, decodeTokensPerS: decode / decodeS, prefill, decode };
}
