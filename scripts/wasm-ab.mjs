// Two builds of the single-threaded module against each other in this Node
// thread (before and after a kernel change: the machine's load is shared by
// both), interleaved: decode CPU time per token and prefill CPU time per
// prompt token of each (Linux's schedstat for this thread, as
// scripts/wasm-speed.mjs measures them), medians, and whether both give the
// same greedy ids.
//
//   node --no-experimental-fetch scripts/wasm-ab.mjs DIST_A DIST_B [--model DIR]
//        [--reps 5] [--tokens 256] [--prompt 256]
//
// DIST_A, DIST_B: directories holding ssm_wasm.mjs and ssm_wasm.wasm (copy
// web/dist/ aside before rebuilding).
import { readFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const dists = args.filter((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1].startsWith('--')));
if (dists.length !== 2) throw new Error('usage: wasm-ab.mjs DIST_A DIST_B [--model DIR] [--reps N] [--tokens N] [--prompt N]');
const model = resolve(opt('model', join(root, 'models/default')));
const reps = Number(opt('reps', 5)), tokens = Number(opt('tokens', 256)), promptLen = Number(opt('prompt', 256));

const ssm = await import(join(root, 'web/src/ssm.mjs'));
const cpu = () => Number(readFileSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e9;
const models = [];
for (const d of dists) models.push(await ssm.load(model, { worker: false, distUrl: pathToFileURL(resolve(d) + '/').href }));
// Byte-like ids: the speed does not depend on which ids they are.
const ids = Array.from({ length: promptLen }, (_, i) => 32 + ((i * 7) % 90));

async function run(m, maxTokens, prompt) {
  await m.reset();
  const c0 = cpu();
  const g = m.generate(prompt, { temperature: 0, maxTokens, ignoreEos: true });
  for await (const _ of g);
  const r = await g.result;
  return { cpu: cpu() - c0, ids: r.ids };
}

// Warm-up: V8 moves hot functions to its optimising compiler while they run.
for (const m of models) for (let w = 0; w < 2; ++w) await run(m, tokens, ids);
const same = (await run(models[0], 32, ids)).ids.join() === (await run(models[1], 32, ids)).ids.join();
const decode = [[], []], prefill = [[], []];
for (let r = 0; r < reps; ++r)
  for (let i = 0; i < 2; ++i) {
    // Differences cancel loading, start-up and per-call costs.
    const full = await run(models[i], tokens, ids), none = await run(models[i], 0, ids);
    const one = await run(models[i], 0, ids.slice(0, 1));
    decode[i].push(((full.cpu - none.cpu) / tokens) * 1e3);
    prefill[i].push(((none.cpu - one.cpu) / (promptLen - 1)) * 1e3);
  }
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const [name, v] of [['decode', decode], ['prefill', prefill]]) {
  const [a, b] = v.map(median);
  console.log(`${name} CPU ms/token: A ${a.toFixed(4)}  B ${b.toFixed(4)}  B is ${(a / b).toFixed(3)}x as fast`);
}
console.log(`same greedy ids (32 tokens): ${same}`);
for (const m of models) m.close?.();
