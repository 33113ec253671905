// The WebGPU model's state against the native engine's state files
// (SSM_CLI: the ssm program): after the same prompt, the same tensors
// (names, shapes, order, values within 1e-5 of each tensor's largest); a
// native state continued on WebGPU, and a WebGPU state (in a state file)
// continued by `ssm generate --session`, both give the native greedy ids.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openPage, REPO } from './harness.mjs';
import { readStateFile, writeStateFile } from './state_file.mjs';

const CLI = process.env.SSM_CLI;
const PROMPT = [5, 17, 200, 3, 9, 44, 1, 77, 130];
const MORE = 7;
let ctx, tmp;

function ssm(args) {
  return execFileSync(CLI, ['generate', ...args, '--temp', '0', '-q', '--print-ids', '--ignore-eos', '-t', '1'],
    { encoding: 'utf8' }).trim().split(',').map(Number);
}

before(async () => {
  assert.ok(CLI && fs.existsSync(CLI), 'SSM_CLI must name the ssm program');
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ssm-webgpu-state-'));
  ctx = await openPage();
});
after(async () => {
  if (ctx) await ctx.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

for (const name of ['mamba2_ssm_tiny', 'mamba3_mimo_tiny', 'hybrid_tiny']) {
  test(`webgpu state matches the engine's state files: ${name}`, async () => {
    const model = path.join(REPO, 'tests/golden', name);
    const file = path.join(tmp, `${name}.state`);
    // The prompt read, one greedy token chosen and left pending; and the
    // whole greedy run the continuations must reproduce.
    ssm(['-m', model, '--prompt-ids', PROMPT.join(','), '-n', '1', '--session', file]);
    const whole = ssm(['-m', model, '--prompt-ids', PROMPT.join(','), '-n', String(MORE + 1)]).slice(PROMPT.length);
    const native = readStateFile(fs.readFileSync(file), file);
    const r = await ctx.page.evaluate(async (a) => (await import('/web/tests/webgpu/state_run.mjs')).run(a),
      { name, prompt: PROMPT, native, continueTokens: MORE });
    console.log(name, JSON.stringify(r.diffs));
    assert.deepEqual(ctx.errors, []);
    assert.equal(r.next, native.header.sequences[0].pending, 'the greedy token after the prompt');
    assert.deepEqual(r.names, native.tensors.map((t) => t.name), 'state tensors and their order');
    for (const [t, d] of Object.entries(r.diffs)) assert.ok(typeof d === 'number' && d <= 1e-5, `${name} ${t}: ${d}`);
    assert.deepEqual(r.cont, whole.slice(1), 'WebGPU continuing the native state');

    // The WebGPU state, written under the native header, continued natively.
    const ours = path.join(tmp, `${name}.webgpu.state`);
    fs.writeFileSync(ours, writeStateFile(native.header, r.ours));
    assert.deepEqual(ssm(['-m', model, '-n', String(MORE), '--session', ours]), whole.slice(1),
      'ssm generate --session continuing the WebGPU state');
  });
}
