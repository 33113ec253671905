// The pthreads build (scripts/build-wasm.sh mt -> web/dist/mt/): with two
// threads it generates the single-threaded build's greedy ids (and the
// native CLI's) in headless Chromium on a cross-origin isolated page
// (scripts/serve-web.mjs sends COOP/COEP), and the speeds of both are
// printed as a ratio measured in the same run; the same under Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as ssm from '../src/ssm.mjs';
import { defaultModel, goldenModels, nativeGenerate, root, tempDir } from './wasm_helpers.mjs';

const chromium = process.env.SSM_CHROMIUM ?? '/usr/bin/chromium';
const built = existsSync(join(root, 'web/dist/mt/ssm_wasm.mjs'));
const skip = built ? false : 'no pthreads build (scripts/build-wasm.sh mt)';
const prompt = 'In the beginning God created the heaven and the earth.';
const n = 48;

const rate = (r) => ({ prefill: r.stats.prefillTokens / r.stats.prefillSeconds, decode: r.stats.decodeTokens / r.stats.decodeSeconds });

async function run(model, threads) {
  const m = await ssm.load(model, { threads, worker: false });
  try {
    assert.equal(m.info.threads, threads);
    const g = m.generate(prompt, { temperature: 0, maxTokens: n, ignoreEos: true });
    for await (const _ of g);
    return await g.result;
  } finally {
    m.close();
  }
}

// Under Node the module's pool Workers keep the process alive until
// Engine.close() ends them (web/src/ssm_engine.mjs): run() closes each
// model, so this file's process exits when its tests end.
test('Node: the pthreads build gives the single-threaded ids', { skip, timeout: 900_000 }, async () => {
  for (const model of [defaultModel, goldenModels[1]]) {
    const one = await run(model, 1);
    const two = await run(model, 2);
    const native = nativeGenerate(model, ['-p', prompt, '-n', String(n), '--temperature', '0', '--ignore-eos'],
      one.promptIds.length);
    assert.deepEqual(two.promptIds, one.promptIds);
    assert.deepEqual(two.ids, one.ids, model);
    assert.deepEqual(one.ids, native.ids, model);
    const a = rate(one), b = rate(two);
    console.log(`# Node ${model}: 2 threads / 1 thread: prefill ${(b.prefill / a.prefill).toFixed(2)}, ` +
      `decode ${(b.decode / a.decode).toFixed(2)} (1 thread: ${a.prefill.toFixed(0)} / ${a.decode.toFixed(0)} tok/s)`);
  }
});

test('Chromium, cross-origin isolated: the pthreads build gives the single-threaded ids', { skip, timeout: 900_000 },
  async () => {
    const { default: puppeteer } = await import(join(root, 'web/node_modules/puppeteer-core/lib/esm/puppeteer/puppeteer-core.js'));
    const { startServer } = await import(join(root, 'scripts/serve-web.mjs'));
    assert.ok(existsSync(chromium), `${chromium}: no chromium (scripts/install-web-deps.sh)`);
    const { dir, cleanup } = tempDir();
    const server = await startServer(0);
    const browser = await puppeteer.launch({
      executablePath: chromium, headless: true, userDataDir: join(dir, 'profile'),
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run'],
      protocolTimeout: 900_000,
    });
    try {
      const page = await browser.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`http://127.0.0.1:${server.address().port}/web/`);
      const out = await page.evaluate(async (p, count) => {
        const api = await import('/web/src/ssm.mjs');
        const results = {};
        for (const threads of [1, 2]) {
          const m = await api.load('/models/default/', { threads });
          const g = m.generate(p, { temperature: 0, maxTokens: count, ignoreEos: true });
          for await (const _ of g);
          results[threads] = { ...(await g.result), threads: m.info.threads };
          m.close();
        }
        return { isolated: crossOriginIsolated, results };
      }, prompt, n);
      assert.equal(out.isolated, true, 'the page is cross-origin isolated');
      const one = out.results[1], two = out.results[2];
      assert.equal(two.threads, 2);
      assert.deepEqual(two.ids, one.ids);
      const native = nativeGenerate(defaultModel, ['-p', prompt, '-n', String(n), '--temperature', '0', '--ignore-eos'],
        one.promptIds.length);
      assert.deepEqual(one.ids, native.ids);
      assert.deepEqual(errors, []);
      const a = rate(one), b = rate(two);
      console.log(`# Chromium built-in model: 2 threads / 1 thread: prefill ${(b.prefill / a.prefill).toFixed(2)}, ` +
        `decode ${(b.decode / a.decode).toFixed(2)} (1 thread: ${a.prefill.toFixed(0)} / ${a.decode.toFixed(0)} tok/s)`);
    } finally {
      await browser.close();
      server.close();
      cleanup();
    }
  });
