// State files cross between the WebAssembly build and the native program
// both ways: a state the module saves continues in `ssm generate --session`
// with the ids the module itself continues with, and a state the program
// saves continues in the module with the program's own continuation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ssm from '../src/ssm.mjs';
import { collect, defaultModel, goldenModels, nativeGenerate, tempDir } from './wasm_helpers.mjs';

const first = 'In the beginning';
const second = ' and the earth';
const n = 24;
const greedy = ['--temperature', '0', '-n', String(n)];

for (const model of [defaultModel, goldenModels[1]]) {
  test(`a wasm state continues natively, exactly: ${model}`, async () => {
    const { dir, cleanup } = tempDir();
    const m = await ssm.load(model);
    try {
      const a = await collect(m.generate(first, { temperature: 0, maxTokens: n }));
      const bytes = await m.state();
      assert.equal(new TextDecoder().decode(bytes.slice(0, 8)), 'SSMSTATE');
      const file = join(dir, 'wasm.state');
      writeFileSync(file, bytes);
      // The whole run natively, for reference: the same first part.
      const nativeFile = join(dir, 'native.state');
      const na = nativeGenerate(model, ['-p', first, '--session', nativeFile, ...greedy], a.promptIds.length);
      assert.deepEqual(a.ids, na.ids);
      // The wasm state, continued by the program and by the module.
      const promptIds = await m.tokenize(second);
      const nb = nativeGenerate(model, ['-p', second, '--session', file, ...greedy], promptIds.length);
      const b = await collect(m.generate(second, { temperature: 0, maxTokens: n }));
      assert.deepEqual(nb.promptIds, b.promptIds);
      assert.deepEqual(nb.ids, b.ids);
      // and the program's own continuation of its own state agrees.
      const nn = nativeGenerate(model, ['-p', second, '--session', nativeFile, ...greedy], promptIds.length);
      assert.deepEqual(nn.ids, b.ids);
    } finally {
      m.close();
      cleanup();
    }
  });

  test(`a native state continues in wasm, exactly: ${model}`, async () => {
    const { dir, cleanup } = tempDir();
    const m = await ssm.load(model);
    try {
      const file = join(dir, 'native.state');
      nativeGenerate(model, ['-p', first, '--session', file, ...greedy], 0);
      const saved = join(dir, 'native-copy.state');
      copyFileSync(file, saved);
      await m.restore(readFileSync(saved));
      assert.ok(m.info.consumed > 0);
      const b = await collect(m.generate(second, { temperature: 0, maxTokens: n }));
      const nb = nativeGenerate(model, ['-p', second, '--session', file, ...greedy], b.promptIds.length);
      assert.deepEqual(b.promptIds, nb.promptIds);
      assert.deepEqual(b.ids, nb.ids);
      // The module's state after the continuation: the same bytes' layout,
      // restorable again (a round trip through state()).
      const again = await m.state();
      await m.restore(again);
    } finally {
      m.close();
      cleanup();
    }
  });
}

test("another model's state is refused with the engine's message", async () => {
  const a = await ssm.load(defaultModel);
  const b = await ssm.load(goldenModels[0]);
  try {
    await collect(a.generate(first, { temperature: 0, maxTokens: 4 }));
    const bytes = await a.state();
    await assert.rejects(b.restore(bytes), (e) => e instanceof ssm.SsmError && /model|fingerprint/i.test(e.message));
    const damaged = new Uint8Array(bytes);
    damaged[damaged.length - 9] ^= 0xff;
    await assert.rejects(a.restore(damaged), ssm.SsmError);
  } finally {
    a.close();
    b.close();
  }
});
