// Every WGSL kernel against the ref backend, in headless Chromium under
// SwiftShader, on the cases ssm_webgpu_op_cases writes (SSM_WEBGPU_CASES).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { openPage } from './harness.mjs';

// max |webgpu - ref| / max |ref| per output, float32 kernels against ref's
// double. Why each bound:
//  - one-pass ops (norms, gates, conv, dt preparation, the Mamba-3 output,
//    the phase and rotations): a handful of float32 roundings of values of
//    order one, plus exp/tanh/sqrt that are accurate to a few ulps; 1e-5.
//  - linear and attention: sums of up to a few hundred products in float32;
//    the error grows like sqrt(K) ulps of the largest term; 1e-5 (the
//    worst seen, 2.5e-6, is the rotary angle pos * inv_freq in float32).
//  - the scans (chunked Mamba-2 SSD and Mamba-3): float32 sums in another
//    order than the recurrence, states carried over up to 64 steps, and
//    decays exp(c_t - c_s) of differences of float32 running sums; 1e-4
//    (the worst seen is 5e-7).
const TOL = { ssd_scan: 1e-4, mamba3_scan: 1e-4 };
const DEFAULT_TOL = 1e-5;

const dir = process.env.SSM_WEBGPU_CASES;
let ctx, results;
before(async () => {
  assert.ok(dir && fs.existsSync(`${dir}/index.json`), 'SSM_WEBGPU_CASES must name the folder ssm_webgpu_op_cases wrote');
  ctx = await openPage({ extra: dir });
  results = await ctx.page.evaluate(async () => (await import('/web/tests/webgpu/ops_run.mjs')).run('/extra'));
});
after(async () => { if (ctx) await ctx.close(); });

test('webgpu ops match ref', () => {
  assert.deepEqual(ctx.errors, []);
  const ops = new Set(results.map((r) => r.op));
  for (const op of ['linear', 'rms_norm', 'gated_rms_norm', 'conv1d', 'ssd_prepare', 'ssd_scan', 'mamba3_prepare',
    'mamba3_scan', 'mamba3_output', 'attention'])
    assert.ok(ops.has(op), `no case of ${op}`);
  const worst = {};
  for (const r of results)
    for (const [name, e] of Object.entries(r.errs)) {
      const key = `${r.op}.${name}`;
      worst[key] = Math.max(worst[key] || 0, e);
      const tol = TOL[r.op] || DEFAULT_TOL;
      assert.ok(e <= tol, `${r.file} ${name}: ${e} > ${tol} (params ${JSON.stringify(r.params)})`);
    }
  console.log('worst relative error per op output:', JSON.stringify(worst, null, 1));
});
