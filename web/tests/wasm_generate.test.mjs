// The WebAssembly build's greedy generation gives the native program's ids:
// on the built-in model and on two public goldens; text streams as pieces
// whose concatenation is the whole text; errors reject with the engine's
// message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ssm from '../src/ssm.mjs';
import { collect, defaultModel, goldenModels, nativeGenerate, tempDir } from './wasm_helpers.mjs';

const prompt = 'And God said';
const n = 40;

for (const model of [defaultModel, ...goldenModels]) {
  test(`greedy ids equal the native CLI's: ${model}`, async () => {
    const m = await ssm.load(model);
    try {
      const r = await collect(m.generate(prompt, { temperature: 0, maxTokens: n }));
      const native = nativeGenerate(model, ['-p', prompt, '-n', String(n), '--temperature', '0'], r.promptIds.length);
      assert.deepEqual(r.promptIds, native.promptIds);
      assert.deepEqual(r.ids, native.ids);
      assert.ok(r.ids.length > 0);
      assert.equal(r.streamed, r.text);
    } finally {
      m.close();
    }
  });
}

test('ids in, ids out; the pieces make up the text', async () => {
  const m = await ssm.load(defaultModel);
  try {
    const ids = await m.tokenize('In the beginning');
    const r = await collect(m.generate(ids, { temperature: 0, maxTokens: 12 }));
    const native = nativeGenerate(defaultModel, ['--prompt-ids', ids.join(','), '-n', '12', '--temperature', '0'],
      ids.length);
    assert.deepEqual(r.ids, native.ids);
    await m.reset();
    // The same prompt as text: the same ids (a byte-level model adds no
    // special tokens), and the text streamed is the text of the result.
    const t = await collect(m.generate('In the beginning', { temperature: 0, maxTokens: 12 }));
    assert.deepEqual(t.ids, r.ids);
    assert.equal(t.streamed, t.text);
    assert.ok(t.text.length > 0);
  } finally {
    m.close();
  }
});

test('sampling with a seed equals the native CLI', async () => {
  const m = await ssm.load(defaultModel);
  try {
    const opts = { temperature: 0.9, topK: 20, topP: 0.9, minP: 0.02, repeatPenalty: 1.1, seed: 7, maxTokens: 30 };
    const r = await collect(m.generate(prompt, opts));
    const native = nativeGenerate(defaultModel, ['-p', prompt, '-n', '30', '--temperature', '0.9', '--top-k', '20',
      '--top-p', '0.9', '--min-p', '0.02', '--repeat-penalty', '1.1', '-s', '7'], r.promptIds.length);
    assert.deepEqual(r.ids, native.ids);
  } finally {
    m.close();
  }
});

test('errors reject with the engine message', async () => {
  const { dir, cleanup } = tempDir();
  try {
    writeFileSync(join(dir, 'config.json'), '{"not": "a model"');
    writeFileSync(join(dir, 'model.safetensors'), 'nope');
    await assert.rejects(ssm.load(dir), (e) => e instanceof ssm.SsmError && /config\.json/.test(e.message));
    await assert.rejects(ssm.load(join(dir, 'missing')), /not found/);
    const m = await ssm.load(defaultModel);
    try {
      await assert.rejects(collect(m.generate([100000], { maxTokens: 1 })), /outside the model's vocabulary/);
      await assert.rejects(m.restore(new Uint8Array([1, 2, 3])), ssm.SsmError);
    } finally {
      m.close();
    }
    await assert.rejects(ssm.load(defaultModel, { backend: 'nope' }), /unknown backend/);
  } finally {
    cleanup();
  }
});
