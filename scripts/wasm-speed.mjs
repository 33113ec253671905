// WebAssembly speed against the native build, in one run on one machine:
// prefill and decode tokens/s of greedy generation on a model (default: the
// built-in one), single-threaded, in Node (this thread) and in headless
// Chromium (the page's Worker), each as a ratio to the native program
// (`ssm generate -t 1 --json`) timed between them. Medians of --reps runs.
// Also decode's CPU seconds per token of each, which a machine
// shared with other work distorts far less than wall-clock rates.
//
//   node --no-experimental-fetch [--no-liftoff] scripts/wasm-speed.mjs [--model DIR] [--prompt 256]
//        [--tokens 128] [--reps 3] [--warmup 1] [--no-chromium] [--cli build/ssm]
//
// --warmup: untimed generations of each build first. V8 compiles the module
// with its baseline compiler and moves hot functions to its optimising one
// while they run, so a module's first generations are slower than later
// ones (2-5x on the built-in model, docs/WEB.md); 0 times them too.
//
// --no-liftoff (a V8 flag, Node's row only): the module compiled by V8's
// optimising compiler up front instead of its baseline compiler first
// (docs/WEB.md, Speed).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
const warmup = Number(opt('warmup', 1));
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

// CPU seconds this process spends (every thread: V8's compiler and GC too).
const cpuNow = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };

async function wasmNode(maxTokens = tokens) {
  await m.reset();
  const cpu0 = cpuNow();
  const g = m.generate(ids, { ...request, maxTokens });
  for await (const _ of g);
  const r = await g.result;
  return { ...rates(r), cpu: cpuNow() - cpu0 };
}

// The native program under bash, whose `times` gives the CPU seconds of its
// children: the program's own, load included (cancelled below by the
// difference with a run that decodes nothing).
function native(maxTokens = tokens) {
  const out = execFileSync('bash', ['-c', '"$@"; times', 'ssm', cli, 'generate', model, '--prompt-ids', ids.join(','),
    '-n', String(maxTokens), '--temperature', '0', '--ignore-eos', '--json', '-t', '1'], { encoding: 'utf8' });
  const lines = out.trim().split('\n');
  const [user, sys] = lines.at(-1).trim().split(/\s+/).map((t) => {
    const [, min, sec] = t.match(/(\d+)m([\d.]+)s/);
    return Number(min) * 60 + Number(sec);
  });
  const j = JSON.parse(lines.slice(0, -2).join('\n'));
  const r = { cpu: user + sys, prefill: j.prefill.tokens / j.prefill.seconds };
  if (maxTokens > 0) r.decode = j.ids.length / j.generated.seconds;
  return r;
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

// CPU seconds of Chromium's processes (the browser's process and all its
// descendants, every thread), from /proc: the page's Worker runs the
// module; the other processes are idle meanwhile but counted too.
function chromiumCpu() {
  const parent = new Map(), ticks = new Map();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;  // ended meanwhile
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');  // fields from the state on
    parent.set(Number(pid), Number(f[1]));
    ticks.set(Number(pid), Number(f[11]) + Number(f[12]));  // utime + stime
  }
  const top = browser.process().pid;
  let sum = 0;
  for (const [pid, t] of ticks) {
    for (let p = pid; p > 1; p = parent.get(p) ?? 0) {
      if (p === top) {
        sum += t;
        break;
      }
    }
  }
  return sum / 100;  // USER_HZ
}

async function wasmChromium(maxTokens = tokens) {
  const cpu0 = chromiumCpu();
  const r = await page.evaluate(async (ids, request) => {
    const m = globalThis.speedModel;
    await m.reset();
    const g = m.generate(ids, request);
    for await (const _ of g);
    const r = await g.result;
    return { prefill: r.stats.prefillTokens / r.stats.prefillSeconds, decode: r.ids.length / r.stats.decodeSeconds };
  }, ids, { ...request, maxTokens });
  return { ...r, cpu: chromiumCpu() - cpu0 };
}

const runs = { native: [], node: [], chromium: [] };
// Decode's CPU seconds per new token, native, Node and Chromium (Linux's
// /proc): each build's CPU time
// for the prompt and `tokens` new ones less that for the prompt alone. On a
// machine shared with other work the wall-clock rates above depend on the
// share of the CPU each process gets; CPU time does much less.
const cpu = { native: [], node: [], chromium: [] };
if (withChromium) await startChromium();
try {
  for (let i = 0; i < warmup; ++i) {
    native();
    await wasmNode();
    if (withChromium) await wasmChromium();
  }
  for (let i = 0; i < reps; ++i) {
    // Interleaved, so that a change in the machine's load touches all three.
    runs.native.push(native());
    runs.node.push(await wasmNode());
    if (withChromium) runs.chromium.push(await wasmChromium());
    runs.native.push(native());
    cpu.native.push((runs.native.at(-1).cpu - native(0).cpu) / tokens);
    cpu.node.push((runs.node.at(-1).cpu - (await wasmNode(0)).cpu) / tokens);
    if (withChromium) cpu.chromium.push((runs.chromium.at(-1).cpu - (await wasmChromium(0)).cpu) / tokens);
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
console.log(`model ${model}, prompt ${ids.length} tokens, ${tokens} new tokens, single-threaded, median of ${reps} after ${warmup} untimed` +
  ` (native twice per round); node ${process.version} ${process.execArgv.join(' ')}`);
console.log('| build | prefill tokens/s | decode tokens/s | prefill vs native | decode vs native |');
console.log('| --- | --- | --- | --- | --- |');
for (const [name, s] of Object.entries(summary)) {
  const n = summary.native;
  console.log(`| ${name} | ${s.prefill.toFixed(1)} | ${s.decode.toFixed(1)} | ${(s.prefill / n.prefill).toFixed(2)} | ` +
    `${(s.decode / n.decode).toFixed(2)} |`);
}
const perToken = {};
for (const [name, xs] of Object.entries(cpu)) if (xs.length) perToken[name] = median(xs);
console.log('| decode CPU time per token (median) | ms | vs native |');
console.log('| --- | --- | --- |');
for (const [name, t] of Object.entries(perToken))
  console.log(`| ${name} | ${(t * 1e3).toFixed(3)} | ${(perToken.native / t).toFixed(2)} |`);
console.log(JSON.stringify({ ...summary, cpuPerToken: perToken }));
