// A language model on WebGPU: the block loop of docs/MATH.md §1 over
// Mamba-2, Mamba-3 (SISO and MIMO) and attention mixers with optional gated
// MLPs, for checkpoints in state-spaces' layout (config.json with ssm_cfg,
// attn_cfg, attn_layer_idx; tensors backbone.*). Weights are uploaded once;
// the decode state lives on the GPU, is read back only on request (state())
// in the engine's layout (src/model/state_file.cpp names and shapes) and is
// written back by restore().

import { Gpu, requestGpuDevice } from './gpu.mjs';
import * as ops from './ops.mjs';
import { parseSafetensors } from './safetensors.mjs';

// `ssm generate`'s sampling defaults (src/model/sampler.h, the CLI).
export const SAMPLING_DEFAULTS = Object.freeze({
  maxTokens: 256, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1, repeatLastN: 64, seed: 0,
  stopIds: [],
});

function checkSampling(o) {
  if (!(Number.isInteger(o.topK) && o.topK >= 0)) throw new Error(`top-k must be >= 0, got ${o.topK}`);
  if (!(o.topP > 0 && o.topP <= 1)) throw new Error(`top-p must be in (0, 1], got ${o.topP}`);
  if (!(o.minP >= 0 && o.minP <= 1)) throw new Error(`min-p must be in [0, 1], got ${o.minP}`);
  if (!(o.repeatPenalty > 0)) throw new Error(`repeat penalty must be > 0, got ${o.repeatPenalty}`);
  if (!(o.repeatLastN >= 0)) throw new Error(`repeat-last-n must be >= 0, got ${o.repeatLastN}`);
  if (!Number.isFinite(o.temperature)) throw new Error(`temperature must be finite, got ${o.temperature}`);
  if (!(Number.isInteger(o.maxTokens) && o.maxTokens >= 1)) throw new Error(`maxTokens must be >= 1, got ${o.maxTokens}`);
}

function num(v, d) {
  return v === undefined || v === null ? d : v;
}

// The engine's reading of a state-spaces config.json (src/model/config.cpp).
export function parseConfig(j) {
  if (!j || typeof j !== 'object') throw new Error('config.json: not an object');
  if (j.model_type === 'mamba2') return parseHfMamba2(j);
  if (j.model_type) throw new Error(`config.json: model_type '${j.model_type}' is not supported by the webgpu backend (state-spaces layout or HF mamba2)`);
  for (const k of ['d_model', 'n_layer', 'vocab_size'])
    if (!(Number.isInteger(j[k]) && j[k] > 0)) throw new Error(`config.json: '${k}' must be a positive integer`);
  const c = {
    dModel: j.d_model, nLayer: j.n_layer, vocab: j.vocab_size,
    padMultiple: num(j.pad_vocab_size_multiple, 8), dIntermediate: num(j.d_intermediate, 0),
    tie: num(j.tie_embeddings, true), eps: num(j.norm_epsilon, 1e-5), attnIdx: j.attn_layer_idx || [],
  };
  if (num(j.rms_norm, true) !== true) throw new Error('config.json: rms_norm=false (LayerNorm) is not supported');
  c.vocabPadded = Math.ceil(c.vocab / c.padMultiple) * c.padMultiple;
  const s = j.ssm_cfg || {};
  const layer = num(s.layer, 'Mamba1');
  if (layer === 'Mamba2') {
    const m = { kind: 'mamba2', dState: num(s.d_state, 128), dConv: num(s.d_conv, 4), expand: num(s.expand, 2),
      headdim: num(s.headdim, 64), ngroups: num(s.ngroups, 1), chunk: num(s.chunk_size, 256),
      rmsnorm: num(s.rmsnorm, true), normBeforeGate: num(s.norm_before_gate, false), bias: num(s.bias, false),
      convBias: num(s.conv_bias, true), dtLimit: s.dt_limit || [0, Infinity] };
    m.dInner = m.expand * c.dModel;
    m.H = m.dInner / m.headdim;
    m.convDim = m.dInner + 2 * m.ngroups * m.dState;
    m.dInProj = 2 * m.dInner + 2 * m.ngroups * m.dState + m.H;
    c.ssm = m;
  } else if (layer === 'Mamba3') {
    const m = { kind: 'mamba3', dState: num(s.d_state, 128), expand: num(s.expand, 2), headdim: num(s.headdim, 64),
      ngroups: num(s.ngroups, 1), ropeFraction: num(s.rope_fraction, 0.5), Afloor: num(s.A_floor, 1e-4),
      outprojNorm: num(s.is_outproj_norm, false), mimo: num(s.is_mimo, false), mimoRank: num(s.mimo_rank, 4),
      chunk: num(s.chunk_size, 64) };
    m.R = m.mimo ? m.mimoRank : 1;
    m.dInner = m.expand * c.dModel;
    m.H = m.dInner / m.headdim;
    const split = Math.floor(m.dState * m.ropeFraction);
    m.S = (split - (split % 2)) / 2;
    m.RGN = m.R * m.ngroups * m.dState;
    m.dInProj = 2 * m.dInner + 2 * m.RGN + 3 * m.H + m.S;
    c.ssm = m;
  } else {
    throw new Error(`config.json: ssm_cfg.layer '${layer}' is not supported by the webgpu backend (Mamba2 or Mamba3)`);
  }
  if (!Number.isInteger(c.ssm.H) || c.ssm.H <= 0) throw new Error('config.json: expand * d_model must be a multiple of headdim');
  if (c.attnIdx.length) {
    const a = j.attn_cfg || {};
    if (!a.num_heads) throw new Error('config.json: attn_cfg.num_heads is required with attn_layer_idx');
    c.attn = { H: a.num_heads, Hkv: num(a.num_heads_kv, a.num_heads), hd: num(a.head_dim, c.dModel / a.num_heads),
      rot: num(a.rotary_emb_dim, 0), base: num(a.rotary_emb_base, 10000), qkvBias: num(a.qkv_proj_bias, true),
      outBias: num(a.out_proj_bias, true), scale: num(a.softmax_scale, 0) };
    if (a.rotary_emb_interleaved) throw new Error('config.json: attn_cfg.rotary_emb_interleaved=true is not supported');
    if (!c.attn.scale) c.attn.scale = 1 / Math.sqrt(c.attn.hd);
  }
  c.layers = [];
  for (let i = 0; i < c.nLayer; ++i) c.layers.push(c.attnIdx.includes(i) ? 'attention' : c.ssm.kind);
  c.embeddingName = 'backbone.embedding.weight';
  return c;
}

function mamba2Shape(m, dModel) {
  m.dInner = m.expand * dModel;
  m.H = m.dInner / m.headdim;
  m.convDim = m.dInner + 2 * m.ngroups * m.dState;
  m.dInProj = 2 * m.dInner + 2 * m.ngroups * m.dState + m.H;
  if (!Number.isInteger(m.H) || m.H <= 0) throw new Error('config.json: expand * hidden_size must be a multiple of head_dim');
  return m;
}

// HF transformers' Mamba2ForCausalLM (the engine's parse_hugging_face):
// the same mixer under HF's key names, no vocabulary padding.
function parseHfMamba2(j) {
  for (const k of ['hidden_size', 'num_hidden_layers', 'vocab_size'])
    if (!(Number.isInteger(j[k]) && j[k] > 0)) throw new Error(`config.json: '${k}' must be a positive integer`);
  if (num(j.hidden_act, 'silu') !== 'silu') throw new Error(`config.json: hidden_act '${j.hidden_act}' is not supported (silu)`);
  const c = { dModel: j.hidden_size, nLayer: j.num_hidden_layers, vocab: j.vocab_size, padMultiple: 1, dIntermediate: 0,
    tie: num(j.tie_word_embeddings, true), eps: num(j.layer_norm_epsilon, 1e-5), attnIdx: [] };
  c.vocabPadded = c.vocab;
  c.ssm = mamba2Shape({ kind: 'mamba2', dState: num(j.state_size, 128), dConv: num(j.conv_kernel, 4), expand: num(j.expand, 2),
    headdim: num(j.head_dim, 64), ngroups: num(j.n_groups, 1), chunk: num(j.chunk_size, 256), rmsnorm: num(j.rms_norm, true),
    normBeforeGate: num(j.norm_before_gate, false), bias: num(j.use_bias, false), convBias: num(j.use_conv_bias, true),
    dtLimit: j.time_step_limit || [0, Infinity] }, c.dModel);
  if (j.num_heads !== undefined && j.num_heads !== c.ssm.H)
    throw new Error(`config.json: num_heads (${j.num_heads}) != expand * hidden_size / head_dim (${c.ssm.H})`);
  c.layers = new Array(c.nLayer).fill('mamba2');
  c.embeddingName = 'backbone.embeddings.weight';
  return c;
}

// JSON as Python writes it: bare Infinity, -Infinity and NaN (outside
// strings) are read as numbers, as the engine's reader does.
export function parseJson(text, name = 'config.json') {
  let out = '', inString = false;
  for (let i = 0; i < text.length; ++i) {
    const ch = text[i];
    if (inString) {
      out += ch;
      if (ch === '\\') out += text[++i] ?? '';
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
      out += ch;
    } else if (text.startsWith('Infinity', i)) {
      out += '1e999';
      i += 7;
    } else if (text.startsWith('NaN', i)) {
      out += 'null';
      i += 2;
    } else out += ch;
  }
  try {
    return JSON.parse(out);
  } catch (e) {
    throw new Error(`${name}: ${e.message}`);
  }
}

export class WebGpuModel {
  // config: the parsed config.json object; tensors: {name: {shape, data}}
  // (parseSafetensors's output); device: a GPUDevice (requested if absent).
  static async load({ config, tensors, device = null, maxBindingBytes = Infinity }) {
    const gpu = new Gpu(device || (await requestGpuDevice()), { maxBindingBytes });
    const m = new WebGpuModel(gpu, parseConfig(config), tensors);
    m.reset(1);
    return m;
  }

  constructor(gpu, cfg, tensors) {
    this.gpu = gpu;
    this.cfg = cfg;
    this.weights = new Map();
    const c = cfg;
    const need = (name, shape) => {
      const t = tensors[name];
      if (!t) throw new Error(`weights: tensor '${name}' is missing`);
      if (shape && (t.shape.length !== shape.length || t.shape.some((x, i) => x !== shape[i])))
        throw new Error(`weights: tensor '${name}' has shape [${t.shape}], expected [${shape}]`);
      const buf = gpu.upload(t.data instanceof Float32Array ? t.data : Float32Array.from(t.data));
      this.weights.set(name, buf);
      return buf;
    };
    const opt = (name) => (tensors[name] ? need(name) : null);
    // The vocabulary-sized matrices may exceed one storage binding: in pieces of rows.
    const rowsOf = (name) => {
      const t = tensors[name];
      if (!t) throw new Error(`weights: tensor '${name}' is missing`);
      if (t.shape.length !== 2 || t.shape[0] !== c.vocabPadded || t.shape[1] !== c.dModel)
        throw new Error(`weights: tensor '${name}' has shape [${t.shape}], expected [${c.vocabPadded},${c.dModel}]`);
      return gpu.uploadRows(t.data instanceof Float32Array ? t.data : Float32Array.from(t.data), c.vocabPadded, c.dModel);
    };
    this.embedding = rowsOf(c.embeddingName);
    this.normF = need('backbone.norm_f.weight', [c.dModel]);
    this.lmHead = c.tie ? this.embedding : rowsOf('lm_head.weight');
    this.layers = c.layers.map((kind, i) => {
      const p = `backbone.layers.${i}.`;
      const L = { kind, norm: need(p + 'norm.weight', [c.dModel]) };
      const mx = p + 'mixer.';
      if (kind === 'mamba2') {
        const s = c.ssm;
        Object.assign(L, {
          inProj: need(mx + 'in_proj.weight', [s.dInProj, c.dModel]), inBias: s.bias ? need(mx + 'in_proj.bias') : null,
          conv: need(mx + 'conv1d.weight', [s.convDim, 1, s.dConv]), convBias: s.convBias ? need(mx + 'conv1d.bias') : null,
          dtBias: need(mx + 'dt_bias', [s.H]), Alog: need(mx + 'A_log', [s.H]), D: need(mx + 'D', [s.H]),
          gnorm: s.rmsnorm ? need(mx + 'norm.weight', [s.dInner]) : null,
          outProj: need(mx + 'out_proj.weight', [c.dModel, s.dInner]), outBias: s.bias ? need(mx + 'out_proj.bias') : null,
        });
      } else if (kind === 'mamba3') {
        const s = c.ssm;
        Object.assign(L, {
          inProj: need(mx + 'in_proj.weight', [s.dInProj, c.dModel]), dtBias: need(mx + 'dt_bias', [s.H]),
          Bbias: need(mx + 'B_bias', [s.H, s.R, s.dState]), Cbias: need(mx + 'C_bias', [s.H, s.R, s.dState]),
          Bnorm: need(mx + 'B_norm.weight', [s.dState]), Cnorm: need(mx + 'C_norm.weight', [s.dState]),
          D: need(mx + 'D', [s.H]), onorm: s.outprojNorm ? need(mx + 'norm.weight', [s.dInner]) : null,
          mimoX: s.mimo ? need(mx + 'mimo_x', [s.H, s.R, s.headdim]) : null,
          mimoZ: s.mimo ? need(mx + 'mimo_z', [s.H, s.R, s.headdim]) : null,
          mimoO: s.mimo ? need(mx + 'mimo_o', [s.H, s.R, s.headdim]) : null,
          outProj: need(mx + 'out_proj.weight', [c.dModel, s.dInner]),
        });
      } else {
        const a = c.attn, width = a.hd * (a.H + 2 * a.Hkv);
        Object.assign(L, {
          inProj: need(mx + 'in_proj.weight', [width, c.dModel]), inBias: a.qkvBias ? need(mx + 'in_proj.bias', [width]) : null,
          outProj: need(mx + 'out_proj.weight', [c.dModel, a.H * a.hd]), outBias: a.outBias ? need(mx + 'out_proj.bias', [c.dModel]) : null,
        });
        if (a.rot > 0) {
          const inv = new Float32Array(a.rot / 2);
          for (let k = 0; k < a.rot / 2; ++k) inv[k] = Math.pow(a.base, (-2 * k) / a.rot);
          L.invFreq = gpu.upload(inv);
        }
      }
      if (tensors[p + 'mlp.fc1.weight']) {
        L.norm2 = need(p + 'norm2.weight', [c.dModel]);
        L.fc1 = need(p + 'mlp.fc1.weight');
        L.hidden = tensors[p + 'mlp.fc1.weight'].shape[0] / 2;
        L.fc2 = need(p + 'mlp.fc2.weight', [c.dModel, L.hidden]);
      }
      return L;
    });
    this.tokens = gpu.buffer(64 * 4);  // the tokens chosen last, fed to the next step
  }

  // Fresh decode state for `batch` sequences (zeros, empty KV caches).
  reset(batch = 1) {
    const { gpu, cfg } = this, s = cfg.ssm;
    // Freed once the work already submitted with them is done.
    gpu.submit();
    for (const st of this.state || [])
      for (const b of Object.values(st)) if (b instanceof GPUBuffer) b.destroy();
    this.batch = batch;
    this.position = 0;
    this.state = this.layers.map((L) => {
      if (L.kind === 'mamba2')
        return { conv: gpu.zeros(batch * (s.dConv - 1) * s.convDim), ssm: gpu.zeros(batch * s.H * s.headdim * s.dState) };
      if (L.kind === 'mamba3')
        return { phase: gpu.zeros(batch * s.H * s.S), ssm: gpu.zeros(batch * s.H * s.headdim * s.dState),
          prev: gpu.zeros(batch * s.H * s.R * (s.dState + s.headdim)) };
      return { k: gpu.zeros(1), v: gpu.zeros(1), cap: 0 };
    });
    if (this.tokens.size < batch * 4) this.tokens = gpu.buffer(batch * 4);
  }

  // Queues the forward of B sequences of L tokens each (ids: a GPU buffer of
  // B L u32, row-major), continuing the decode state. Logits of the rows
  // `logitRows` ('all' or 'last') go to the returned buffer (rows, padded vocab).
  queueForward(ids, B, L, logitRows = 'all') {
    const { gpu, cfg } = this, D = cfg.dModel, rows = B * L;
    if (B !== this.batch) throw new Error(`webgpu: the state holds ${this.batch} sequences, the input ${B}`);
    const h = gpu.scratch('h', rows * D), xn = gpu.scratch('xn', rows * D);
    ops.embedding(gpu, { ids, E: this.embedding, out: h, rows, D });
    this.layers.forEach((layer, i) => {
      ops.rmsNorm(gpu, { x: h, w: layer.norm, out: xn, rows, n: D, eps: cfg.eps });
      if (layer.kind === 'mamba2') this.mamba2(layer, this.state[i], xn, h, B, L);
      else if (layer.kind === 'mamba3') this.mamba3(layer, this.state[i], xn, h, B, L);
      else this.attention(layer, this.state[i], xn, h, B, L);
      if (layer.fc1) {
        const F = layer.hidden, hid = gpu.scratch('mlp_h', rows * 2 * F), g = gpu.scratch('mlp_g', rows * F);
        ops.rmsNorm(gpu, { x: h, w: layer.norm2, out: xn, rows, n: D, eps: cfg.eps });
        ops.linear(gpu, { x: xn, W: layer.fc1, y: hid, M: rows, N: 2 * F, K: D });
        ops.gatedRmsNorm(gpu, { y: { buf: hid, off: 0, ld: 2 * F }, z: { buf: hid, off: F, ld: 2 * F }, out: g, rows, n: F });
        ops.linear(gpu, { x: g, W: layer.fc2, y: h, M: rows, N: D, K: F, accumulate: true });
      }
    });
    this.position += L;
    const V = cfg.vocabPadded;
    const last = logitRows === 'last';
    const M = last ? B : rows;
    ops.rmsNorm(gpu, { x: last ? { buf: h, off: (L - 1) * D, ld: L * D } : h, w: this.normF, out: xn, rows: M, n: D, eps: cfg.eps });
    const logits = gpu.scratch('logits', M * V);
    ops.linear(gpu, { x: xn, W: this.lmHead, y: logits, M, N: V, K: D });
    return logits;
  }

  mamba2(p, st, xn, h, B, L) {
    const { gpu, cfg } = this, s = cfg.ssm, D = cfg.dModel, rows = B * L;
    const proj = gpu.scratch('proj', rows * s.dInProj), xbc = gpu.scratch('xbc', rows * s.convDim);
    const dt = gpu.scratch('dt', rows * s.H), A = gpu.scratch('A', s.H), ys = gpu.scratch('ys', rows * s.dInner);
    const yn = gpu.scratch('yn', rows * s.dInner);
    ops.linear(gpu, { x: xn, W: p.inProj, bias: p.inBias, y: proj, M: rows, N: s.dInProj, K: D });
    ops.conv1d(gpu, { input: { buf: proj, off: s.dInner, ld: s.dInProj }, weight: p.conv, bias: p.convBias,
      state: st.conv, out: xbc, B, L, C: s.convDim, K: s.dConv });
    ops.ssdPrepare(gpu, { dtRaw: { buf: proj, off: s.dInner + s.convDim, ld: s.dInProj }, dtBias: p.dtBias, Alog: p.Alog,
      dt, A, rows, H: s.H, dtMin: s.dtLimit[0], dtMax: s.dtLimit[1] });
    const GN = s.ngroups * s.dState;
    ops.ssdScan(gpu, { xbc, xOff: 0, bOff: s.dInner, cOff: s.dInner + GN, ld: s.convDim, dt, A, D: p.D, y: ys,
      state: st.ssm, B, L, H: s.H, P: s.headdim, G: s.ngroups, N: s.dState, Q: s.chunk });
    ops.gatedRmsNorm(gpu, { y: ys, z: { buf: proj, off: 0, ld: s.dInProj }, w: p.gnorm, out: yn, rows,
      n: s.dInner / s.ngroups, runs: s.ngroups, eps: cfg.eps, normBeforeGate: s.normBeforeGate });
    ops.linear(gpu, { x: yn, W: p.outProj, bias: p.outBias, y: h, M: rows, N: D, K: s.dInner, accumulate: true });
  }

  mamba3(p, st, xn, h, B, L) {
    const { gpu, cfg } = this, s = cfg.ssm, D = cfg.dModel, rows = B * L;
    const { H, R, S, RGN } = s, P = s.headdim, N = s.dState, W = s.dInProj;
    const proj = gpu.scratch('proj', rows * W);
    ops.linear(gpu, { x: xn, W: p.inProj, y: proj, M: rows, N: W, K: D });
    const at = 2 * s.dInner + 2 * RGN;
    const t = {
      dal: gpu.scratch('m3_dal', B * H * L * 3), phases: gpu.scratch('m3_phases', B * H * L * Math.max(S, 1)),
      bn: gpu.scratch('m3_bn', rows * RGN), cn: gpu.scratch('m3_cn', rows * RGN),
      q: gpu.scratch('m3_q', B * H * L * R * N), k: gpu.scratch('m3_k', B * H * L * R * N),
      v: gpu.scratch('m3_v', B * H * L * R * P), o: gpu.scratch('m3_o', B * H * L * R * P),
    };
    ops.mamba3Prepare(gpu, { proj, ld: W, B, L, H, G: s.ngroups, R, P, N, S, halves: s.mimo, Afloor: s.Afloor, eps: cfg.eps,
      cols: { x: s.dInner, B: 2 * s.dInner, C: 2 * s.dInner + RGN, ddt: at, ddA: at + H, trap: at + 2 * H, ang: at + 3 * H },
      dtBias: p.dtBias, Bnorm: p.Bnorm, Cnorm: p.Cnorm, Bbias: p.Bbias, Cbias: p.Cbias, mimoX: p.mimoX,
      phase: st.phase, ...t });
    ops.mamba3Scan(gpu, { q: t.q, k: t.k, v: t.v, dal: t.dal, D: p.D, o: t.o, ssm: st.ssm, prev: st.prev,
      B, H, L, R, P, N, chunk: s.chunk });
    const y = gpu.scratch('ys', rows * s.dInner);
    ops.mamba3Output(gpu, { o: t.o, z: { buf: proj, off: 0, ld: W }, mimoZ: p.mimoZ, mimoO: p.mimoO, norm: p.onorm,
      eps: cfg.eps, y, B, L, H, R, P });
    ops.linear(gpu, { x: y, W: p.outProj, y: h, M: rows, N: D, K: s.dInner, accumulate: true });
  }

  attention(p, st, xn, h, B, L) {
    const { gpu, cfg } = this, a = cfg.attn, D = cfg.dModel, rows = B * L;
    const width = a.hd * (a.H + 2 * a.Hkv);
    const past = this.position;
    if (past + L > st.cap) {
      // Grow the caches (doubling), keeping the first `past` positions.
      const cap = Math.max(past + L, 2 * st.cap, 16);
      const k = gpu.zeros(B * a.Hkv * cap * a.hd), v = gpu.zeros(B * a.Hkv * cap * a.hd);
      ops.kvCopy(gpu, { src: st.k, dst: k, B, Hkv: a.Hkv, len: past, hd: a.hd, cap: st.cap, cap2: cap });
      ops.kvCopy(gpu, { src: st.v, dst: v, B, Hkv: a.Hkv, len: past, hd: a.hd, cap: st.cap, cap2: cap });
      Object.assign(st, { k, v, cap });
    }
    const qkv = gpu.scratch('qkv', rows * width), out = gpu.scratch('att_out', rows * a.H * a.hd);
    ops.linear(gpu, { x: xn, W: p.inProj, bias: p.inBias, y: qkv, M: rows, N: width, K: D });
    ops.attention(gpu, { qkv, kCache: st.k, vCache: st.v, invFreq: p.invFreq || null, rotHalf: a.rot / 2, out,
      B, L, H: a.H, Hkv: a.Hkv, hd: a.hd, past, cap: st.cap, scale: a.scale });
    ops.linear(gpu, { x: out, W: p.outProj, bias: p.outBias, y: h, M: rows, N: D, K: a.H * a.hd, accumulate: true });
  }

  // The ids into a reused buffer. Queued work is submitted first: a write
  // is ordered before every submission that follows it.
  uploadIds(ids) {
    const u = Uint32Array.from(ids, (v) => {
      const x = Number(v);
      if (!(Number.isInteger(x) && x >= 0 && x < this.cfg.vocab))
        throw new Error(`webgpu: token id ${v} is not in the vocabulary (0..${this.cfg.vocab - 1})`);
      return x;
    });
    this.gpu.submit();
    const buf = this.gpu.scratch('ids', u.length);
    this.gpu.write(buf, u);
    return buf;
  }

  // The logits (B L, vocab_size), read back, of B sequences of L tokens
  // (ids: B L integers, row-major), continuing the state.
  async logits(ids, B, L) {
    const buf = this.queueForward(this.uploadIds(ids), B, L, 'all');
    return this.readLogits(buf, B * L);
  }

  // One sequence: feeds ids (integers, or a GPU buffer of one token) and
  // reads back the last position's logits (vocab_size floats).
  async lastLogits(ids) {
    const idsBuf = ids instanceof GPUBuffer ? ids : this.uploadIds(ids);
    const L = ids instanceof GPUBuffer ? 1 : ids.length;
    return this.readLogits(this.queueForward(idsBuf, 1, L, 'last'), 1);
  }

  // One sequence: feeds ids into the state, nothing read back but the end
  // of the work (so that errors surface here).
  async feed(ids) {
    this.queueForward(this.uploadIds(ids), 1, ids.length, 'last');
    this.gpu.submit();
    await this.gpu.device.queue.onSubmittedWorkDone();
  }

  async readLogits(buf, rows) {
    const Vp = this.cfg.vocabPadded, V = this.cfg.vocab;
    const all = await this.gpu.readF32(buf, 0, rows * Vp);
    if (V === Vp) return all;
    const out = new Float32Array(rows * V);
    for (let r = 0; r < rows; ++r) out.set(all.subarray(r * Vp, r * Vp + V), r * V);
    return out;
  }

  // Feeds `ids` (B L tokens, or a GPU buffer of them) and chooses each
  // sequence's next token on the GPU (sampling options as generate's);
  // reads back only those B integers. recent: per sequence, the ids the
  // repetition penalty looks at.
  async next(ids, B, L, opts = {}, recent = null) {
    const o = { ...SAMPLING_DEFAULTS, ...opts };
    const idsBuf = ids instanceof GPUBuffer ? ids : this.uploadIds(ids);
    const logits = this.queueForward(idsBuf, B, L, 'last');
    const V = this.cfg.vocab, rowLd = this.cfg.vocabPadded;
    if (o.repeatPenalty !== 1 && o.repeatLastN > 0 && recent && recent.some((r) => r.length)) {
      const n = Math.min(o.repeatLastN, Math.max(...recent.map((r) => r.length)));
      const flat = new Uint32Array(B * n).fill(0xffffffff);  // ids >= V are ignored
      recent.forEach((r, b) => flat.set(r.slice(-n), b * n));
      const rb = this.gpu.scratch('recent', B * n);
      this.gpu.write(rb, flat);  // before the submission that runs this step
      ops.repeatPenalty(this.gpu, { logits, recent: rb, B, n, V, rowLd, penalty: o.repeatPenalty });
    }
    // Into a fresh buffer: the ids buffer of this step may be the last one.
    const tokens = this.gpu.scratch(idsBuf === this.tokens ? 'tokens_b' : 'tokens_a', B);
    ops.selectToken(this.gpu, { logits, tokens, B, V, rowLd, temperature: o.temperature, seed: o.seed >>> 0,
      step: this.position, topK: o.topK, topP: o.topP, minP: o.minP });
    this.tokens = tokens;
    return Array.from(new Uint32Array(await this.gpu.read(tokens, 0, B * 4)));
  }

  // Generation of one sequence, continuing the state: the prompt's ids,
  // then new ids as they are chosen (an async iterator), up to maxTokens or
  // a stop id (included). Each decode step feeds the token chosen on the
  // GPU back without an upload. Options and defaults are `ssm generate`'s.
  async *generateIds(prompt, opts = {}) {
    const o = { ...SAMPLING_DEFAULTS, ...opts };
    checkSampling(o);
    if (!Array.isArray(prompt) && !ArrayBuffer.isView(prompt))
      throw new Error('webgpu: generate takes token ids; text goes through the engine\'s tokenizer (web/src/ssm.mjs)');
    if (this.batch !== 1) this.reset(1);
    if (!prompt.length) throw new Error('generate: the prompt has no tokens');
    const recent = [...prompt].slice(-Math.max(o.repeatLastN, 0));
    let n = 0;
    let tok = await this.next(prompt, 1, prompt.length, o, [recent]);
    for (;;) {
      const id = tok[0];
      yield id;
      ++n;
      if (n >= o.maxTokens || o.stopIds.includes(id)) return;
      recent.push(id);
      if (recent.length > o.repeatLastN) recent.shift();
      tok = await this.next(this.tokens, 1, 1, o, [recent]);
    }
  }

  // All of generateIds's ids at once (a fresh state unless keepState).
  async generate(prompt, { keepState = false, ...opts } = {}) {
    if (!keepState) this.reset(1);
    const out = [];
    for await (const id of this.generateIds(prompt, opts)) out.push(id);
    return out;
  }

  // The decode state in the engine's layout: every layer's tensors in
  // file order, named layers.<i>.<name>, each {name, dtype, shape, data}.
  async exportState() {
    const { gpu, cfg } = this, s = cfg.ssm, B = this.batch, out = [];
    for (let i = 0; i < this.layers.length; ++i) {
      const st = this.state[i], kind = this.layers[i].kind, n = `layers.${i}.`;
      const f32 = async (name, shape, buf, off = 0) => {
        const count = shape.reduce((a, x) => a * x, 1);
        out.push({ name: n + name, dtype: 'F32', shape, data: await gpu.readF32(buf, off * 4, count) });
      };
      if (kind === 'mamba2') {
        await f32('conv', [B, s.dConv - 1, s.convDim], st.conv);
        await f32('ssm', [B, s.H, s.headdim, s.dState], st.ssm);
      } else if (kind === 'mamba3') {
        await f32('phase', [B, s.H, s.S], st.phase);
        await f32('ssm', [B, s.H, s.headdim, s.dState], st.ssm);
        await f32('k_prev', [B, s.H, s.R, s.dState], st.prev);
        await f32('v_prev', [B, s.H, s.R, s.headdim], st.prev, B * s.H * s.R * s.dState);
      } else {
        const a = cfg.attn, len = this.position, shape = [B, a.Hkv, len, a.hd];
        const k = gpu.zeros(Math.max(1, B * a.Hkv * len * a.hd)), v = gpu.zeros(Math.max(1, B * a.Hkv * len * a.hd));
        ops.kvCopy(gpu, { src: st.k, dst: k, B, Hkv: a.Hkv, len, hd: a.hd, cap: st.cap, cap2: len });
        ops.kvCopy(gpu, { src: st.v, dst: v, B, Hkv: a.Hkv, len, hd: a.hd, cap: st.cap, cap2: len });
        await f32('k', shape, k);
        await f32('v', shape, v);
        k.destroy();
        v.destroy();
        out.push({ name: n + 'lengths', dtype: 'I64', shape: [B], data: new BigInt64Array(B).fill(BigInt(len)) });
      }
    }
    return { position: this.position, batch: B, tensors: out };
  }

  // Restores a state of exportState()'s form (or a state file's tensors).
  importState({ tensors, position = null }) {
    const { gpu, cfg } = this, s = cfg.ssm;
    const byName = new Map(tensors.map((t) => [t.name, t]));
    const B = tensors.length ? tensors[0].shape[0] : 1;
    const get = (name, shape) => {
      const t = byName.get(name);
      if (!t) throw new Error(`state: tensor '${name}' is missing`);
      if (t.shape.length !== shape.length || t.shape.some((x, i) => x !== shape[i]))
        throw new Error(`state: tensor '${name}' is [${t.shape}], the model expects [${shape}]`);
      return t.data;
    };
    let pos = position;
    this.reset(B);
    this.layers.forEach((L, i) => {
      const st = this.state[i], n = `layers.${i}.`;
      if (L.kind === 'mamba2') {
        gpu.write(st.conv, get(n + 'conv', [B, s.dConv - 1, s.convDim]));
        gpu.write(st.ssm, get(n + 'ssm', [B, s.H, s.headdim, s.dState]));
      } else if (L.kind === 'mamba3') {
        gpu.write(st.phase, get(n + 'phase', [B, s.H, s.S]));
        gpu.write(st.ssm, get(n + 'ssm', [B, s.H, s.headdim, s.dState]));
        gpu.write(st.prev, get(n + 'k_prev', [B, s.H, s.R, s.dState]));
        gpu.write(st.prev, get(n + 'v_prev', [B, s.H, s.R, s.headdim]), B * s.H * s.R * s.dState * 4);
      } else {
        const a = cfg.attn, lens = byName.get(n + 'lengths');
        if (!lens) throw new Error(`state: tensor '${n}lengths' is missing`);
        const len = Number(lens.data[0]);
        for (const x of lens.data) if (Number(x) !== len) throw new Error('state: sequences of different lengths are not supported by the webgpu backend');
        if (pos === null) pos = len;
        if (len !== pos) throw new Error(`state: KV cache of ${len} tokens at position ${pos}`);
        const cap = Math.max(16, len);
        const pad = (data) => {
          const full = new Float32Array(B * a.Hkv * cap * a.hd);
          for (let bj = 0; bj < B * a.Hkv; ++bj)
            full.set(data.subarray(bj * len * a.hd, (bj + 1) * len * a.hd), bj * cap * a.hd);
          return gpu.upload(full);
        };
        Object.assign(st, { k: pad(get(n + 'k', [B, a.Hkv, len, a.hd])), v: pad(get(n + 'v', [B, a.Hkv, len, a.hd])), cap });
      }
    });
    this.position = pos === null ? 0 : pos;
  }
}

// The entry web/src/ssm.mjs calls for backend 'webgpu': a model directory's
// files by name ({'config.json': ArrayBuffer | string, 'model.safetensors':
// ArrayBuffer, or the shards model.safetensors.index.json names}) to a
// WebGpuModel. options.device: a GPUDevice to use (requested otherwise).
export async function load(files, options = {}) {
  const bytes = (name) => {
    const v = files[name];
    if (v === undefined) return undefined;
    if (typeof v === 'string') return new TextEncoder().encode(v).buffer;
    if (v instanceof ArrayBuffer) return v;
    return v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength);
  };
  const text = (name) => new TextDecoder().decode(bytes(name));
  if (!files['config.json']) throw new Error('load: the model has no config.json');
  const config = parseJson(text('config.json'));
  let shards = ['model.safetensors'];
  if (!files['model.safetensors'] && files['model.safetensors.index.json'])
    shards = [...new Set(Object.values(JSON.parse(text('model.safetensors.index.json')).weight_map))];
  const tensors = {};
  for (const name of shards) {
    const b = bytes(name);
    if (!b) throw new Error(`load: the model has no ${name}`);
    Object.assign(tensors, parseSafetensors(b, name));
  }
  return WebGpuModel.load({ config, tensors, device: options.device || null });
}
