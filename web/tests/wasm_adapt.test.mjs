// WSLA fast-adapt in the WebAssembly build: the held-out loss falls, and
// the steps' losses and the held-out loss after training are those of the
// native `ssm train --wsla` with the same options on the same text (the same
// windows, seeds and schedule; only the summation order of the matrix
// products differs, hence a relative tolerance). Afterwards the model
// generates, and a state saved before adapting is refused (other weights).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ssm from '../src/ssm.mjs';
import { cli, collect, defaultModel, root, tempDir } from './wasm_helpers.mjs';

const close = (a, b, rel) => Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b));

test('WSLA adapt lowers the held-out loss as native ssm train --wsla does', async () => {
  const { dir, cleanup } = tempDir();
  const text = readFileSync(join(root, 'docs/MATH.md'), 'utf8').slice(0, 12000);
  const m = await ssm.load(defaultModel);
  try {
    await collect(m.generate('And God said', { temperature: 0, maxTokens: 4 }));
    const before = await m.state();
    const steps = [];
    const r = await m.adapt(text, { steps: 6, lr: 0.003, batch: 2, seqLen: 64, holdout: 0.1,
      onStep: (s) => steps.push(s) });
    assert.equal(r.steps.length, 6);
    assert.deepEqual(steps.map((s) => s.step), [1, 2, 3, 4, 5, 6]);
    assert.ok(r.heldOutAfter.loss < r.heldOutBefore.loss, JSON.stringify(r));

    const data = join(dir, 'data.txt');
    writeFileSync(data, text);
    const log = execFileSync(cli, ['train', defaultModel, '--data', data, '--out', join(dir, 'out'), '--wsla',
      '--steps', '6', '--batch', '2', '--seq-len', '64', '--lr', '0.003', '--warmup', '0', '--weight-decay', '0',
      '--holdout', '0.1', '--log-every', '1', '-t', '1'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const losses = [...log.matchAll(/^step \d+\/\d+ loss ([0-9.]+)/gm)].map((x) => Number(x[1]));
    const heldOut = Number(/held-out loss ([0-9.]+)/.exec(log)[1]);
    assert.equal(losses.length, 6, log);
    for (let i = 0; i < 6; ++i) assert.ok(close(r.steps[i].loss, losses[i], 1e-3), `step ${i + 1}: ${r.steps[i].loss} vs ${losses[i]}`);
    assert.ok(close(r.heldOutAfter.loss, heldOut, 1e-3), `held-out ${r.heldOutAfter.loss} vs ${heldOut}`);

    const g = await collect(m.generate(' and', { temperature: 0, maxTokens: 8 }));
    assert.equal(g.ids.length, 8);
    await assert.rejects(m.restore(before), ssm.SsmError);
  } finally {
    m.close();
    cleanup();
  }
});
