// web/src/ssm.mjs with backend 'webgpu' (headless Chromium, WebGPU on the
// CPU through SwiftShader): the forward passes on the GPU, the tokenizer,
// options, sampler and state files in the WebAssembly module. Greedy and
// seeded generations give the native CLI's ids on the built-in model and
// two public goldens; a state the page saves is the CLI's state file (same
// header, tensors within float32 rounding) and continues natively to the
// ids the page continues with; a native state continues in the page as in
// the CLI. Needs web/dist/ (scripts/build-wasm.sh), SSM_CLI, puppeteer-core.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openPage } from './webgpu/harness.mjs';
import { readStateFile } from './webgpu/state_file.mjs';
import { defaultModel, goldenModels, nativeGenerate, root, tempDir } from './wasm_helpers.mjs';

const prompt = 'And God said';
const n = 40;
let ctx;

// Calls fn of web/tests/webgpu/api_run.mjs in the page.
function page(fn, ...args) {
  return ctx.page.evaluate(async (f, a) => (await import('/web/tests/webgpu/api_run.mjs'))[f](...a), fn, args);
}
const urlOf = (dir) => `/${dir.slice(root.length + 1)}/`;
// The page's errors, less the 404s of a model directory's optional files
// (tokenizer.json, generation_config.json, the shard index), which the
// loader asks for and finds absent.
const pageErrors = () => ctx.errors.filter((e) => !/Failed to load resource: .* 404/.test(e));

before(async () => {
  ctx = await openPage();
});
after(async () => {
  if (ctx) await ctx.close();
});

for (const model of [defaultModel, ...goldenModels]) {
  test(`webgpu greedy ids equal the native CLI's: ${model}`, async () => {
    const opened = await page('open', 'g', urlOf(model), 'webgpu');
    assert.equal(opened.backend, 'webgpu');
    assert.equal(opened.info.backend, 'webgpu');
    try {
      const r = await page('generate', 'g', prompt, { temperature: 0, maxTokens: n });
      const native = nativeGenerate(model, ['-p', prompt, '-n', String(n), '--temperature', '0'], r.promptIds.length);
      assert.deepEqual(r.promptIds, native.promptIds);
      assert.deepEqual(r.ids, native.ids);
      assert.ok(r.ids.length > 0);
      assert.equal(r.streamed, r.text);
      assert.deepEqual(pageErrors(), []);
    } finally {
      await page('close', 'g');
    }
  });
}

test('webgpu sampling with a seed draws what the native CLI draws', async () => {
  await page('open', 's', urlOf(defaultModel), 'webgpu');
  try {
    const opts = { temperature: 0.9, topK: 20, topP: 0.9, minP: 0.02, repeatPenalty: 1.1, seed: 7, maxTokens: 30 };
    const r = await page('generate', 's', prompt, opts);
    const native = nativeGenerate(defaultModel, ['-p', prompt, '-n', '30', '--temperature', '0.9', '--top-k', '20',
      '--top-p', '0.9', '--min-p', '0.02', '--repeat-penalty', '1.1', '-s', '7'], r.promptIds.length);
    assert.deepEqual(r.ids, native.ids);
    // A stop string ends the text before it, as the CLI's does.
    const stop = r.text.slice(5, 7);
    await page('open', 's2', urlOf(defaultModel), 'webgpu');
    const cut = await page('generate', 's2', prompt, { ...opts, stop: [stop] });
    const nativeCut = nativeGenerate(defaultModel, ['-p', prompt, '-n', '30', '--temperature', '0.9', '--top-k', '20',
      '--top-p', '0.9', '--min-p', '0.02', '--repeat-penalty', '1.1', '-s', '7', '--stop', stop], r.promptIds.length);
    assert.equal(cut.finish, 'stop string');
    assert.deepEqual(cut.ids, nativeCut.ids);
    assert.ok(!cut.text.includes(stop));
    assert.match(await page('failure', 's', 'adapt', 'some text to adapt on', { steps: 1 }), /SsmError: .*webgpu/);
  } finally {
    await page('close', 's');
    await page('close', 's2');
  }
});

const first = 'In the beginning';
const second = ' and the earth';
const m = 24;
const greedy = ['--temperature', '0', '-n', String(m)];

for (const model of [defaultModel, goldenModels[1]]) {
  test(`a webgpu state is the CLI's state file and continues natively: ${model}`, async () => {
    const { dir, cleanup } = tempDir();
    await page('open', 'a', urlOf(model), 'webgpu');
    try {
      const a = await page('generate', 'a', first, { temperature: 0, maxTokens: m });
      const file = join(dir, 'webgpu.state');
      writeFileSync(file, Buffer.from(await page('state', 'a'), 'base64'));
      const nativeFile = join(dir, 'native.state');
      const na = nativeGenerate(model, ['-p', first, '--session', nativeFile, ...greedy], a.promptIds.length);
      assert.deepEqual(a.ids, na.ids);
      // The same header (fingerprint, position, pending, consumed, recent,
      // tensor list) and the tensors within float32 rounding: 40 tokens of
      // recurrence summed in another order than the CPU's (1.4e-5 of the
      // largest value at most, measured; 1e-4 allowed).
      const ours = readStateFile(readFileSync(file), file);
      const theirs = readStateFile(readFileSync(nativeFile), nativeFile);
      assert.deepEqual(ours.header, theirs.header);
      let worst = 0;
      for (const [i, t] of theirs.tensors.entries()) {
        let d = 0, big = 0;
        t.data.forEach((x, j) => { d = Math.max(d, Math.abs(ours.tensors[i].data[j] - x)); big = Math.max(big, Math.abs(x)); });
        const rel = d === 0 ? 0 : d / big;
        worst = Math.max(worst, rel);
        assert.ok(rel <= 1e-4, `${t.name}: max difference ${d} of ${big}`);
      }
      console.log(`# ${model}: state tensors within ${worst.toExponential(2)} of the native (relative to each tensor's largest)`);
      // The page's state continued by the program, by the page, and the
      // program's own state continued by the program: the same ids.
      const nb = nativeGenerate(model, ['-p', second, '--session', file, ...greedy], 0);
      const b = await page('generate', 'a', second, { temperature: 0, maxTokens: m });
      const nn = nativeGenerate(model, ['-p', second, '--session', nativeFile, ...greedy], b.promptIds.length);
      assert.deepEqual(nb.all.slice(b.promptIds.length), b.ids);
      assert.deepEqual(nn.ids, b.ids);
      assert.deepEqual(pageErrors(), []);
    } finally {
      await page('close', 'a');
      cleanup();
    }
  });

  test(`a native state continues on webgpu as in the CLI: ${model}`, async () => {
    const { dir, cleanup } = tempDir();
    await page('open', 'b', urlOf(model), 'webgpu');
    try {
      const file = join(dir, 'native.state');
      nativeGenerate(model, ['-p', first, '--session', file, ...greedy], 0);
      const info = await page('restore', 'b', readFileSync(file).toString('base64'));
      assert.ok(info.consumed > 0);
      const b = await page('generate', 'b', second, { temperature: 0, maxTokens: m });
      const nb = nativeGenerate(model, ['-p', second, '--session', file, ...greedy], b.promptIds.length);
      assert.deepEqual(b.promptIds, nb.promptIds);
      assert.deepEqual(b.ids, nb.ids);
      // Damaged bytes are refused and the session stays as it was.
      const bytes = Buffer.from(await page('state', 'b'), 'base64');
      bytes[bytes.length - 9] ^= 0xff;
      assert.match(await page('failure', 'b', 'restore', bytes.toString('base64')), /SsmError/);
      assert.deepEqual(pageErrors(), []);
    } finally {
      await page('close', 'b');
      cleanup();
    }
  });
}
