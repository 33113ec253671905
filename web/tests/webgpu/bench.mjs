// Prefill and decode tokens/s of the WebGPU backend in headless Chromium
// (SwiftShader: the CPU), on a model directory (config.json and
// model.safetensors, e.g. from `ssm init`) or, without one, on a
// 130m-shaped Mamba-2 with random weights:
//   node web/tests/webgpu/bench.mjs [--model DIR] [prefill_tokens] [decode_tokens]
import { openPage } from './harness.mjs';

const config = {
  d_model: 768, n_layer: 24, vocab_size: 50280, pad_vocab_size_multiple: 8, d_intermediate: 0,
  ssm_cfg: { layer: 'Mamba2', d_state: 128, d_conv: 4, expand: 2, headdim: 64, ngroups: 1, chunk_size: 256 },
  attn_layer_idx: [], attn_cfg: {}, rms_norm: true, residual_in_fp32: true, fused_add_norm: true, tie_embeddings: true,
};
const args = process.argv.slice(2);
const at = args.indexOf('--model');
const dir = at >= 0 ? args.splice(at, 2)[1] : null;
const prefill = Number(args[0] || 64), decode = Number(args[1] || 16);
const ctx = await openPage({ extra: dir });
try {
  const r = await ctx.page.evaluate(async (a) => (await import('/web/tests/webgpu/bench_run.mjs')).run(a),
    { config, model: !!dir, prefill, decode });
  console.log(JSON.stringify(r));
  if (ctx.errors.length) {
    console.error('page errors:', ctx.errors.join('\n'));
    process.exitCode = 1;
  }
} finally {
  await ctx.close();
}
