// The WebGPU forward on the golden models, in headless Chromium under
// SwiftShader: logits within SPEC §7's tolerance of the golden ones, a
// prefill in pieces and decode steps equal to one prefill, a state that
// round-trips, greedy generations equal to the golden ids.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openPage } from './harness.mjs';

// SPEC §7: max|ours - ref| / max|ref| <= 1e-4 (5e-4 for mamba2_ssm_tiny,
// whose reference ran TF32 kernels).
const CASES = { mamba2_ssm_tiny: 5e-4, mamba2_hf_tiny: 1e-4, mamba3_siso_tiny: 1e-4, mamba3_mimo_tiny: 1e-4, hybrid_tiny: 1e-4 };
// The model against itself (pieces, decode, restore): float32 kernels that
// sum in a different order, so a few ulps of the largest logit.
const SELF_TOL = 2e-5;

let ctx;
before(async () => { ctx = await openPage(); });
after(async () => { if (ctx) await ctx.close(); });

for (const [name, tol] of Object.entries(CASES)) {
  test(`webgpu golden ${name}`, async () => {
    const r = await ctx.page.evaluate(async (n) => (await import('/web/tests/webgpu/golden_run.mjs')).run(n), name);
    console.log(JSON.stringify(r));
    assert.deepEqual(ctx.errors, []);
    assert.ok(r.prefill_err <= tol, `${name}: prefill logits off by ${r.prefill_err} of the largest (tolerance ${tol})`);
    assert.ok(r.pieces_err <= SELF_TOL, `${name}: prefill in pieces differs by ${r.pieces_err}`);
    assert.ok(r.decode_err <= SELF_TOL, `${name}: decode steps differ from prefill by ${r.decode_err}`);
    assert.ok(r.restore_max_diff <= SELF_TOL, `${name}: restored state continues differently (${r.restore_max_diff})`);
    if (r.gen_want) assert.deepEqual(r.gen, r.gen_want, `${name}: greedy generation`);
    assert.ok(r.pieces >= 3, `${name}: the embedding in ${r.pieces} pieces`);
    assert.equal(r.pieces_logits_diff, 0, `${name}: logits with the embedding in pieces`);
  });
}

test('webgpu bad input is refused with a message naming the problem', async () => {
  const r = await ctx.page.evaluate(async () => (await import('/web/tests/webgpu/golden_run.mjs')).errors());
  assert.match(r.no_weights, /no model\.safetensors/);
  assert.match(r.truncated, /model\.safetensors: header of \d+ bytes runs past the end/);
  assert.match(r.bad_config, /config\.json/);
  assert.match(r.wrong_shape, /tensor 'backbone\.layers\.0\.mixer\.in_proj\.weight' has shape/);
  assert.match(r.bad_id, /token id 999 is not in the vocabulary/);
  assert.match(r.text_prompt, /takes token ids/);
  assert.match(r.bad_top_p, /top-p must be in \(0, 1\]/);
});
