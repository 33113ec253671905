// Token selection on the GPU against the engine sampler's definition:
// greedy is the argmax, the repetition penalty its formula, and sampled ids
// follow the truncated distribution (top-k, top-p, min-p): never an id
// outside the kept set, and frequencies within 5 standard deviations (plus
// 0.005) of the probabilities. The draws are a fixed function of the seed,
// so the test cannot flicker.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openPage } from './harness.mjs';

let ctx, r;
before(async () => {
  ctx = await openPage();
  r = await ctx.page.evaluate(async () => (await import('/web/tests/webgpu/sample_run.mjs')).run());
});
after(async () => { if (ctx) await ctx.close(); });

test('greedy is the argmax; the repetition penalty is its formula', () => {
  assert.equal(r.greedy, r.argmax);
  // WGSL division is exact to 2.5 ulp only: a few ulps of values below 4.
  assert.ok(r.penaltyMaxDiff <= 2e-6, `penalty off by ${r.penaltyMaxDiff}`);
});

test('sampled ids follow the truncated distribution', () => {
  for (const c of r.cases) {
    const what = JSON.stringify(c.options);
    c.counts.forEach((n, id) => {
      const p = c.expected[id], freq = n / c.draws;
      if (p === 0) assert.equal(n, 0, `${what}: id ${id} is outside the kept set but was drawn ${n} times`);
      const sd = Math.sqrt((p * (1 - p)) / c.draws);
      assert.ok(Math.abs(freq - p) <= 5 * sd + 0.005, `${what}: id ${id} drawn with frequency ${freq}, probability ${p}`);
    });
  }
});
