// In the page: the WebGPU model's state after a prompt, next to a state the
// native engine wrote; and a continuation from the native state.
import { load } from '/web/src/webgpu/model.mjs';

async function bytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.arrayBuffer();
}

export async function run({ name, prompt, native, continueTokens }) {
  const dir = `/tests/golden/${name}`;
  const model = await load({ 'config.json': await bytes(`${dir}/config.json`), 'model.safetensors': await bytes(`${dir}/model.safetensors`) });
  model.reset(1);
  const [next] = await model.next(prompt, 1, prompt.length, { temperature: 0 });
  const ours = await model.exportState();
  const diffs = {};
  for (const t of native.tensors) {
    const o = ours.tensors.find((x) => x.name === t.name);
    if (!o) { diffs[t.name] = 'missing'; continue; }
    if (JSON.stringify(o.shape) !== JSON.stringify(t.shape) || o.dtype !== t.dtype) {
      diffs[t.name] = `ours ${o.dtype} [${o.shape}], native ${t.dtype} [${t.shape}]`;
      continue;
    }
    let d = 0, m = 0;
    for (let i = 0; i < t.data.length; ++i) {
      d = Math.max(d, Math.abs(Number(o.data[i]) - t.data[i]));
      m = Math.max(m, Math.abs(t.data[i]));
    }
    diffs[t.name] = m > 0 ? d / m : d;
  }
  // Continue from the native state: its pending token first.
  model.importState({
    position: native.header.position,
    tensors: native.tensors.map((t) => ({ ...t,
      data: t.dtype === 'I64' ? BigInt64Array.from(t.data, BigInt) : Float32Array.from(t.data) })),
  });
  const cont = [];
  for await (const id of model.generateIds([native.header.sequences[0].pending], { maxTokens: continueTokens, temperature: 0 }))
    cont.push(id);
  return { next, names: ours.tensors.map((t) => t.name), diffs, cont,
    ours: ours.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: Array.from(t.data, Number) })) };
}
