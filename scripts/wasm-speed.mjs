// WebAssembly speed against the native build, in one run on one machine:
// prefill and decode tokens/s of greedy generation on a model (default: the
// built-in one), single-threaded, in Node (this thread) and in headless
// Chromium (the page's Worker), each as a ratio to the native program
// (`ssm generate -t 1 --json`) timed between them. Medians of --reps runs.
//
//   node --no-experimental-fetch [--no-liftoff] scripts/wasm-speed.mjs [--model DIR] [--prompt 256]
//        [--tokens 128] [--reps 3] [--no-chromium] [--cli build/ssm]
//
// --no-liftoff (a V8 flag, Node's row only): the module compiled by V8's
// optimising compiler up front instead of its baseline compiler first
// (docs/WEB.md, Speed).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const model = resolve(opt('model', join(root, 'models/default')));
const promptLen = Number(opt('prompt', 256));
const tokens = Number(opt('tokens', 128));
const reps = Number(opt('reps', 3));
const cli = resolve(opt('cli', process.env.SSM_CLI ?? join(root, 'build/ssm')));
const withChromium = !args.includes('--no-chromium');

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const text = 'In the beginning God created the heaven and the earth. And the earth was without form, and void. ';

const ssm = await import(join(root, 'web/src/ssm.mjs'));
const m = await ssm.load(model, { worker: false });
// The prompt: the text's tokens, or (a model without a tokenizer) its bytes
// as ids; generation's speed does not depend on which ids they are.
const long = text.repeat(Math.ceil((promptLen * 4) / text.length));
let ids;
try {
  ids = await m.tokenize(long);
} catch {
  ids = Array.from(new TextEncoder().encode(long));
}
ids = ids.slice(0, promptLen);
const request = { temperature: 0, maxTokens: tokens, ignoreEos: true };

function rates(r) {
  return { prefill: r.stats.prefillTokens / r.stats.prefillSeconds, decode: r.ids.length / r.stats.decodeSeconds };
}

async function wasmNode() {
  await m.reset();
  const g = m.generate(ids, request);
  for await (const _ of g);
  return rates(await g.result);
}

function native() {
  const out = execFileSync(cli, ['generate', model, '--prompt-ids', ids.join(','), '-n', String(tokens),
    '--temperature', '0', '--ignore-eos', '--json', '-t', '1'], { encoding: 'utf8' });
  const j = JSON.parse(out);
  return { prefill: j.prefill.tokens / j.prefill.seconds, decode: j.ids.length / j.generated.seconds };
}

let page = null, browser = null, server = null, profile = null;
async function startChromium() {
  const { default: puppeteer } = await import(join(root, 'web/node_modules/puppeteer-core/lib/esm/puppeteer/puppeteer-core.js'));
  const { startServer } = await import(join(root, 'scripts/serve-web.mjs'));
  server = await startServer(0);
  profile = mkdtempSync(join(tmpdir(), 'ssm-speed-'));
  browser = await puppeteer.launch({
    executablePath: process.env.SSM_CHROMIUM ?? '/usr/bin/chromium', headless: true, userDataDir: profile,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/web/`);
  const rel = model.startsWith(root + '/models/') ? model.slice(root.length) : null;
  if (!rel) throw new Error(`--model must be under ${root}/models/ for the page (served as /models/)`);
  await page.evaluate(async (url) => {
    const ssm = await import('/web/src/ssm.mjs');
    globalThis.speedModel = await ssm.load(url);
  }, rel + '/');
}

async function wasmChromium() {
  return page.evaluate(async (ids, request) => {
    const m = globalThis.speedModel;
    await m.reset();
    const g = m.generate(ids, request);
    for await (const _ of g);
    const r = await g.result;
    return { prefill: r.stats.prefillTokens / r.stats.prefillSeconds, decode: r.ids.length / r.stats.decodeSeconds };
  }, ids, request);
}

const runs = { native: [], node: [], chromium: [] };
if (withChromium) await startChromium();
try {
  for (let i = 0; i < reps; ++i) {
    // Interleaved, so that a change in the machine's load touches all three.
    runs.native.push(native());
    runs.node.push(await wasmNode());
    if (withChromium) runs.chromium.push(await wasmChromium());
    runs.native.push(native());
  }
} finally {
  m.close();
  if (browser) await browser.close();
  if (server) server.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
}

const summary = {};
for (const [name, rs] of Object.entries(runs)) {
  if (!rs.length) continue;
  summary[name] = { prefill: median(rs.map((r) => r.prefill)), decode: median(rs.map((r) => r.decode)) };
}
console.log(`model ${model}, prompt ${ids.length} tokens, ${tokens} new tokens, single-threaded, median of ${reps}` +
  ` (native twice per round); node ${process.version} ${process.execArgv.join(' ')}`);
console.log('| build | prefill tokens/s | decode tokens/s | prefill vs native | decode vs native |');
console.log('| --- | --- | --- | --- | --- |');
for (const [name, s] of Object.entries(summary)) {
  const n = summary.native;
  console.log(`| ${name} | ${s.prefill.toFixed(1)} | ${s.decode.toFixed(1)} | ${(s.prefill / n.prefill).toFixed(2)} | ` +
    `${(s.decode / n.decode).toFixed(2)} |`);
}
console.log(JSON.stringify(summary));
