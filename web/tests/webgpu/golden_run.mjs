// In the page: runs the WebGPU forward on a golden case of tests/golden and
// measures it against the golden (and against itself for decode), returning
// numbers for the node test to judge.
import { WebGpuModel, parseJson } from '/web/src/webgpu/model.mjs';
import { requestGpuDevice } from '/web/src/webgpu/gpu.mjs';
import { parseSafetensors } from '/web/src/webgpu/safetensors.mjs';

async function bytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.arrayBuffer();
}

// max |a - b| / max |ref| over the (rows, V) logits, rows [r0, r1).
function relErr(a, ref, V, r0 = 0, r1 = ref.length / V) {
  let d = 0, m = 0;
  for (let i = r0 * V; i < r1 * V; ++i) {
    d = Math.max(d, Math.abs(a[i] - ref[i]));
    m = Math.max(m, Math.abs(ref[i]));
  }
  return d / m;
}

let device = null;

export async function run(name) {
  const dir = `/tests/golden/${name}`;
  const config = parseJson(new TextDecoder().decode(await bytes(`${dir}/config.json`)), `${name}/config.json`);
  const tensors = parseSafetensors(await bytes(`${dir}/model.safetensors`), `${name}/model.safetensors`);
  const golden = parseSafetensors(await bytes(`${dir}/golden.safetensors`), `${name}/golden.safetensors`);
  device = device || (await requestGpuDevice());
  const model = await WebGpuModel.load({ config, tensors, device });
  const V = model.cfg.vocab;
  const [B, L] = golden.input_ids.shape;
  const ids = Array.from(golden.input_ids.data, Number);
  const ref = golden.logits.data;
  const out = { name, B, L };

  // 1. Prefill of the whole batch against the golden logits.
  model.reset(B);
  let t0 = performance.now();
  const full = await model.logits(ids, B, L);
  out.prefill_ms = performance.now() - t0;
  out.prefill_err = relErr(full, ref, V);

  // 2. A prefill in two pieces (the second continues the state), then the
  // rest one decode step at a time: each against the whole prefill.
  const split = Math.min(L - 4, 20), steps = Math.min(L - split, 12);
  const rows = (t0_, t1_) => {
    const r = [];
    for (let b = 0; b < B; ++b) for (let t = t0_; t < t1_; ++t) r.push(ids[b * L + t]);
    return r;
  };
  const pick = (src, t0_, t1_) => {
    const o = new Float32Array(B * (t1_ - t0_) * V);
    for (let b = 0; b < B; ++b) o.set(src.subarray((b * L + t0_) * V, (b * L + t1_) * V), b * (t1_ - t0_) * V);
    return o;
  };
  model.reset(B);
  const a = await model.logits(rows(0, split - 6), B, split - 6);
  const b = await model.logits(rows(split - 6, split), B, 6);
  out.pieces_err = Math.max(relErr(a, pick(full, 0, split - 6), V), relErr(b, pick(full, split - 6, split), V));
  let decodeErr = 0;
  t0 = performance.now();
  for (let t = split; t < split + steps; ++t) {
    const step = await model.logits(rows(t, t + 1), B, 1);
    decodeErr = Math.max(decodeErr, relErr(step, pick(full, t, t + 1), V));
  }
  out.decode_ms_per_step = (performance.now() - t0) / steps;
  out.decode_err = decodeErr;

  // 3. A state exported mid-sequence, restored into a fresh model state, continues identically.
  model.reset(B);
  await model.logits(rows(0, split), B, split);
  const saved = await model.exportState();
  out.state_tensors = saved.tensors.map((t) => `${t.name} [${t.shape}]`);
  const cont = await model.logits(rows(split, split + 4), B, 4);
  model.reset(B);
  model.importState(saved);
  const again = await model.logits(rows(split, split + 4), B, 4);
  out.restore_max_diff = relErr(again, cont, V);

  // 4. Greedy generation against the golden's ids.
  if (golden.gen_prompt) {
    const prompt = Array.from(golden.gen_prompt.data, Number);
    const want = Array.from(golden.gen_output.data, Number).slice(prompt.length);
    t0 = performance.now();
    out.gen = await model.generate(prompt, { maxTokens: want.length, temperature: 0 });
    out.gen_ms = performance.now() - t0;
    out.gen_want = want;
  }
  // 5. The embedding and LM head in pieces of rows (as a vocabulary larger
  // than one storage binding is held): the same logits.
  const inPieces = await WebGpuModel.load({ config, tensors, device, maxBindingBytes: Math.ceil(V / 3) * model.cfg.dModel * 4 });
  out.pieces = inPieces.embedding.length;
  inPieces.reset(B);
  out.pieces_logits_diff = relErr(await inPieces.logits(ids, B, L), full, V);
  return out;
}

// Bad input gets an error naming the problem (the message is returned).
export async function errors() {
  const dir = '/tests/golden/mamba2_ssm_tiny';
  const { load } = await import('/web/src/webgpu/model.mjs');
  const cfg = await bytes(`${dir}/config.json`), weights = await bytes(`${dir}/model.safetensors`);
  const out = {};
  const attempt = async (what, f) => {
    try {
      await f();
      out[what] = 'no error';
    } catch (e) {
      out[what] = e.message;
    }
  };
  await attempt('no_weights', () => load({ 'config.json': cfg }));
  await attempt('truncated', () => load({ 'config.json': cfg, 'model.safetensors': weights.slice(0, 100) }));
  await attempt('bad_config', () => load({ 'config.json': '{"d_model": 64', 'model.safetensors': weights }));
  await attempt('wrong_shape', () => load({ 'config.json': new TextDecoder().decode(cfg).replace('"d_state": 16', '"d_state": 32'),
    'model.safetensors': weights }));
  const model = await load({ 'config.json': cfg, 'model.safetensors': weights });
  await attempt('bad_id', () => model.logits([1, 2, 999], 1, 3));
  await attempt('text_prompt', () => model.generate('hello'));
  await attempt('bad_top_p', () => model.generate([1, 2], { topP: 0 }));
  return out;
}
