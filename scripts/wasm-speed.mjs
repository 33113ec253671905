// WebAssembly speed against the native build, in one run on one machine:
// prefill and decode of greedy generation on a model (default: the built-in
// one), single-threaded, in Node (this thread) and in headless Chromium (the
// page's Worker), each as a ratio to the native program (`ssm generate -t 1
// --json`) run between them. Medians of --reps rounds.
//
// The figure that means something on a shared machine is CPU time per
// token: the on-CPU time (Linux's schedstat, nanoseconds) of the thread that
// runs the module (Node's main thread; Chromium's DedicatedWorker thread in
// the renderer), against the native process's (bash's `times`). Wall-clock
// rates (the engines' own timers) depend on the share of the CPU each
// process gets from the other work on the machine and are printed too.
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

// CPU seconds of one thread, from Linux's schedstat (nanoseconds: the
// time it ran on a CPU, whatever else ran beside it).
function threadCpu(pid, tid) {
  return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e9;
}
// Node: the thread that runs the module (this one: {worker: false}); V8's
// background compilers and GC helpers are not counted.
const cpuNow = () => threadCpu(process.pid, process.pid);

async function wasmNode(maxTokens = tokens, prompt = ids) {
  await m.reset();
  const cpu0 = cpuNow();
  const g = m.generate(prompt, { ...request, maxTokens });
  for await (const _ of g);
  const r = await g.result;
  return { ...rates(r), cpu: cpuNow() - cpu0 };
}

// The native program under bash, whose `times` gives the CPU seconds of its
// children: the program's own, load included (cancelled below by the
// difference with a run that decodes nothing, and one with a 1-token prompt).
function native(maxTokens = tokens, prompt = ids) {
  const out = execFileSync('bash', ['-c', '"$@"; times', 'ssm', cli, 'generate', model, '--prompt-ids', prompt.join(','),
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

// Chromium's processes: the browser's and its descendants (/proc).
function chromiumPids() {
  const parent = new Map();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      parent.set(Number(pid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // ended meanwhile
    }
  }
  const top = browser.process().pid;
  return [...parent.keys()].filter((pid) => {
    for (let p = pid; p > 1; p = parent.get(p) ?? 0) if (p === top) return true;
    return false;
  });
}

// CPU seconds of the threads of Chromium's processes: {worker} those of the
// dedicated Worker that runs the module (the renderer's thread named
// "DedicatedWorker thread", comm "DedicatedWorker"), which is what compares
// with the native program's one thread; {all} every thread of every
// process (compositor, IPC, V8's compilers and GC, the browser and GPU
// processes), an upper bound.
function chromiumCpu() {
  let worker = 0, all = 0, workers = 0;
  for (const pid of chromiumPids()) {
    let tids;
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const t = threadCpu(pid, tid);
        all += t;
        if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').startsWith('DedicatedWorker')) {
          worker += t;
          ++workers;
        }
      } catch {
        // ended meanwhile
      }
    }
  }
  if (workers !== 1) throw new Error(`expected one DedicatedWorker thread in Chromium's processes, found ${workers}`);
  return { worker, all };
}

async function wasmChromium(maxTokens = tokens, prompt = ids) {
  await page.evaluate(() => globalThis.speedModel.reset());
  const cpu0 = chromiumCpu();
  const r = await page.evaluate(async (ids, request) => {
    const g = globalThis.speedModel.generate(ids, request);
    for await (const _ of g);
    const r = await g.result;
    return { prefill: r.stats.prefillTokens / r.stats.prefillSeconds, decode: r.ids.length / r.stats.decodeSeconds };
  }, prompt, { ...request, maxTokens });
  const cpu1 = chromiumCpu();
  return { ...r, cpu: cpu1.worker - cpu0.worker, cpuAll: cpu1.all - cpu0.all };
}

// Each round runs every build three times, interleaved so that a change in
// the machine's load touches all of them: the prompt and `tokens` new ones,
// the prompt alone, and a 1-token prompt alone. Their CPU times' differences
// are decode's CPU seconds per step (tokens - 1 steps: the last token is
// not fed) and prefill's per prompt token, with loading, start-up and
// per-call costs cancelled. Wall-clock rates are the engines' own timers of
// the first run.
const builds = { native, node: wasmNode };
if (withChromium) builds.chromium = wasmChromium;
const runs = {}, cpu = {};
for (const name of Object.keys(builds)) {
  runs[name] = [];
  cpu[name] = { decode: [], prefill: [], decodeAll: [], prefillAll: [] };
}
const one = ids.slice(0, 1);
if (withChromium) await startChromium();
try {
  for (let i = 0; i < warmup; ++i) for (const run of Object.values(builds)) await run();
  for (let i = 0; i < reps; ++i) {
    const full = {}, prompt = {}, base = {};
    for (const [name, run] of Object.entries(builds)) full[name] = await run();
    for (const [name, run] of Object.entries(builds)) prompt[name] = await run(0);
    for (const [name, run] of Object.entries(builds)) base[name] = await run(0, one);
    for (const name of Object.keys(builds)) {
      runs[name].push(full[name]);
      const c = cpu[name];
      c.decode.push((full[name].cpu - prompt[name].cpu) / (tokens - 1));
      c.prefill.push((prompt[name].cpu - base[name].cpu) / (ids.length - 1));
      if (full[name].cpuAll !== undefined) {
        c.decodeAll.push((full[name].cpuAll - prompt[name].cpuAll) / (tokens - 1));
        c.prefillAll.push((prompt[name].cpuAll - base[name].cpuAll) / (ids.length - 1));
      }
    }
  }
} finally {
  m.close();
  if (browser) await browser.close();
  if (server) server.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
}

const summary = {};
for (const [name, rs] of Object.entries(runs)) {
  const c = cpu[name];
  summary[name] = {
    prefill: median(rs.map((r) => r.prefill)), decode: median(rs.map((r) => r.decode)),
    cpuDecodeMs: median(c.decode) * 1e3, cpuPrefillMs: median(c.prefill) * 1e3,
  };
  if (c.decodeAll.length) {
    summary[name].cpuAllDecodeMs = median(c.decodeAll) * 1e3;
    summary[name].cpuAllPrefillMs = median(c.prefillAll) * 1e3;
  }
}
const n = summary.native;
console.log(`model ${model}, prompt ${ids.length} tokens, ${tokens} new tokens, single-threaded, median of ${reps} after ${warmup} untimed;` +
  ` node ${process.version} ${process.execArgv.join(' ')}`);
console.log('| build | decode CPU ms/token | vs native | prefill CPU ms/token | vs native | wall decode tok/s | vs native | wall prefill tok/s | vs native |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
const row = (label, d, p, s) => console.log(`| ${label} | ${d.toFixed(4)} | ${(n.cpuDecodeMs / d).toFixed(2)} | ${p.toFixed(4)} | ` +
  `${(n.cpuPrefillMs / p).toFixed(2)} | ${s ? `${s.decode.toFixed(0)} | ${(s.decode / n.decode).toFixed(2)} | ` +
  `${s.prefill.toFixed(0)} | ${(s.prefill / n.prefill).toFixed(2)}` : ' | | | '} |`);
for (const [name, s] of Object.entries(summary)) {
  const label = { native: 'native `-t 1`', node: 'Node (its main thread)', chromium: 'Chromium (the Worker thread)' }[name];
  row(label, s.cpuDecodeMs, s.cpuPrefillMs, s);
  if (s.cpuAllDecodeMs !== undefined) row('Chromium (all its processes)', s.cpuAllDecodeMs, s.cpuAllPrefillMs, null);
}
console.log(JSON.stringify(summary));
