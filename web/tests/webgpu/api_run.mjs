// In the test page: web/src/ssm.mjs's public API with a chosen backend,
// models kept by key between the Node test's calls. Bytes cross to Node as
// base64 (puppeteer passes JSON).
import * as ssm from '/web/src/ssm.mjs';

const models = new Map();

function toBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; ++i) out[i] = s.charCodeAt(i);
  return out;
}

export async function open(key, url, backend) {
  const m = await ssm.load(url, { backend });
  models.set(key, m);
  return { info: m.info, backend: m.backend };
}

export async function generate(key, prompt, options) {
  const run = models.get(key).generate(prompt, options);
  let streamed = '';
  for await (const piece of run) streamed += piece;
  return { streamed, ...(await run.result) };
}

export async function state(key) {
  return toBase64(await models.get(key).state());
}

export async function restore(key, b64) {
  const m = models.get(key);
  await m.restore(fromBase64(b64));
  return m.info;
}

// The message of the error a call rejects with ('' when it resolves);
// restore's bytes as base64.
export async function failure(key, op, ...args) {
  if (op === 'restore') args[0] = fromBase64(args[0]);
  try {
    await models.get(key)[op](...args);
    return '';
  } catch (e) {
    return `${e.name}: ${e.message}`;
  }
}

export function close(key) {
  models.get(key)?.close();
  models.delete(key);
}
