// ssm in JavaScript: load a model, generate (an async iterator of text
// pieces), keep its state as the engine's state-file bytes, adapt it with
// WSLA. The engine is web/dist/ssm_wasm.{mjs,wasm} (scripts/build-wasm.sh);
// in a page it runs in a module Worker, so generation never blocks the page;
// in Node in the calling thread unless {worker: true}. Types: ssm.d.ts.
//
//   import * as ssm from './ssm.mjs';
//   const model = await ssm.load('models/default/');        // or {name: ArrayBuffer}
//   for await (const piece of model.generate('And God said', {temperature: 0})) show(piece);
//   const bytes = await model.state();   // what `ssm generate --session` reads
//   await model.restore(bytes);
//   await model.adapt(text, {steps: 20, lr: 1e-3});
import { Engine, SsmError } from './ssm_engine.mjs';

export { SsmError };

const isNode = typeof process === 'object' && typeof process.versions?.node === 'string';

// The files of a model directory fetched from a URL: the required ones, and
// those read when present.
const REQUIRED = ['config.json'];
const OPTIONAL = ['tokenizer.json', 'generation_config.json'];

async function readSource(source) {
  if (source && typeof source === 'object' && !(source instanceof URL)) {
    const files = {};
    for (const [name, data] of Object.entries(source)) {
      if (data instanceof ArrayBuffer) files[name] = new Uint8Array(data);
      else if (ArrayBuffer.isView(data)) files[name] = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      else if (typeof data === 'string') files[name] = new TextEncoder().encode(data);
      else throw new SsmError(`load: file '${name}' must be an ArrayBuffer, a typed array or a string`);
    }
    return files;
  }
  let base = String(source);
  if (!base.endsWith('/')) base += '/';
  const get = await fileGetter(base);
  const files = {};
  for (const name of REQUIRED) {
    const data = await get(name);
    if (!data) throw new SsmError(`load: ${base}${name}: not found`);
    files[name] = data;
  }
  for (const name of OPTIONAL) {
    const data = await get(name);
    if (data) files[name] = data;
  }
  const index = await get('model.safetensors.index.json');
  if (index) {
    files['model.safetensors.index.json'] = index;
    const shards = new Set(Object.values(JSON.parse(new TextDecoder().decode(index)).weight_map ?? {}));
    for (const shard of shards) {
      const data = await get(shard);
      if (!data) throw new SsmError(`load: ${base}${shard}: not found (named by model.safetensors.index.json)`);
      files[shard] = data;
    }
  } else {
    const data = await get('model.safetensors');
    if (!data) throw new SsmError(`load: ${base}model.safetensors: not found`);
    files['model.safetensors'] = data;
  }
  return files;
}

// name -> Uint8Array or null when absent: fetch for URLs, the file system
// for paths and file: URLs under Node.
async function fileGetter(base) {
  const isUrl = /^[a-z][a-z0-9+.-]*:/i.test(base);
  if (isNode && (!isUrl || base.startsWith('file:'))) {
    const { readFile } = await import('node:fs/promises');
    const { fileURLToPath } = await import('node:url');
    const dir = isUrl ? fileURLToPath(base) : base;
    return async (name) => {
      try {
        return new Uint8Array(await readFile(dir + name));
      } catch (e) {
        if (e.code === 'ENOENT') return null;
        throw new SsmError(`load: ${dir}${name}: ${e.message}`);
      }
    };
  }
  return async (name) => {
    const url = new URL(name, new URL(base, globalThis.location?.href)).href;
    const response = await fetch(url);
    if (response.status === 404) return null;
    if (!response.ok) throw new SsmError(`load: ${url}: HTTP ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
  };
}

// The engine in this thread: the same calls as the Worker's.
class DirectChannel {
  static async create(options) {
    const c = new DirectChannel();
    c.engine = await Engine.create(options);
    c.queue = Promise.resolve();
    return c;
  }
  call(op, args = {}, onEvent = () => {}) {
    const run = async () => {
      const e = this.engine;
      switch (op) {
        case 'load': return e.load(args.files, args.backend);
        case 'generate': return e.generate(args.request, onEvent);
        case 'adapt': return e.adapt(args.request, onEvent);
        case 'restore': return e.restore(args.bytes);
        case 'score': return e.score(args.request);
        case 'tokenize': return e.tokenize(args.text);
        default: return e[op]();
      }
    };
    const p = this.queue.then(run);
    this.queue = p.catch(() => {});
    return p;
  }
  close() { this.engine.close(); }
}

// The engine in a Worker: requests by id, events streamed back.
class WorkerChannel {
  static async create(options) {
    const c = new WorkerChannel();
    const url = new URL('./ssm_worker.mjs', import.meta.url);
    c.pending = new Map();
    c.nextId = 1;
    let ready;
    const isReady = new Promise((resolve) => { ready = resolve; });
    const onMessage = (m) => {
      if (m.ready) return ready();
      const p = c.pending.get(m.id);
      if (!p) return;
      if ('event' in m) return p.onEvent(m.event);
      c.pending.delete(m.id);
      if ('error' in m) p.reject(new SsmError(m.error));
      else p.resolve(m.result);
    };
    const onError = (e) => {
      const err = new SsmError(`the engine's worker failed: ${e?.message ?? e}`);
      for (const p of c.pending.values()) p.reject(err);
      c.pending.clear();
    };
    if (isNode) {
      const { Worker } = await import('node:worker_threads');
      c.worker = new Worker(url);
      c.worker.on('message', onMessage);
      c.worker.on('error', onError);
      c.post = (m) => c.worker.postMessage(m);
    } else {
      c.worker = new Worker(url, { type: 'module' });
      c.worker.onmessage = (e) => onMessage(e.data);
      c.worker.onerror = (e) => onError(e);
      c.post = (m) => c.worker.postMessage(m);
    }
    await isReady;
    await c.call('init', { distUrl: options.distUrl && String(options.distUrl), threads: options.threads });
    return c;
  }
  call(op, args = {}, onEvent = () => {}) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.post({ id, op, args });
    });
  }
  close() { this.worker.terminate(); }
}

// A generation: iterate it for the text pieces as they come; `result`
// resolves to {ids, promptIds, text, finish, seed, stats, consumed}.
class Generation {
  constructor(start) {
    this.pieces = [];
    this.waiting = null;
    this.finished = false;
    this.result = start((piece) => this.#push(piece)).then(
      (r) => { this.#end(); return r; },
      (e) => { this.error = e; this.#end(); throw e; });
    this.result.catch(() => {});  // reported through the iterator too
  }
  #push(piece) {
    this.pieces.push(piece);
    this.#wake();
  }
  #end() {
    this.finished = true;
    this.#wake();
  }
  #wake() {
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w();
    }
  }
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.pieces.length) {
        yield this.pieces.shift();
        continue;
      }
      if (this.finished) {
        if (this.error) throw this.error;
        return;
      }
      await new Promise((resolve) => { this.waiting = resolve; });
    }
  }
}

// CLI option names accepted as the API's camelCase ones.
const OPTION_NAMES = {
  max_tokens: 'maxTokens', top_k: 'topK', top_p: 'topP', min_p: 'minP', repeat_penalty: 'repeatPenalty',
  repeat_last_n: 'repeatLastN', stop_ids: 'stopIds', ignore_eos: 'ignoreEos', no_special: 'noSpecial',
};

export class Model {
  constructor(channel, info, backend) {
    this.channel = channel;
    this.info = info;
    this.backend = backend;
  }

  // prompt: text, or an array of token ids (then the ids are the output too).
  generate(prompt, options = {}) {
    const request = {};
    for (const [k, v] of Object.entries(options)) request[OPTION_NAMES[k] ?? k] = v;
    if (Array.isArray(prompt)) request.promptIds = prompt;
    else request.prompt = prompt ?? '';
    return new Generation((onPiece) => this.channel.call('generate', { request }, onPiece));
  }

  // The session's state as a state file's bytes (Uint8Array).
  state() { return this.channel.call('state'); }
  // Continue from a state file's bytes (this model's; others are refused).
  async restore(bytes) { this.info = await this.channel.call('restore', { bytes: new Uint8Array(bytes) }); }
  // Forget the session: the next generation starts fresh.
  async reset() { this.info = await this.channel.call('reset'); }
  score(text, { seqLen = 256 } = {}) { return this.channel.call('score', { request: { text, seqLen } }); }
  tokenize(text) { return this.channel.call('tokenize', { text }); }
  // WSLA fast-adapt on text: {steps, heldOutBefore, heldOutAfter}; onStep
  // gets each step's {step, loss, lr, gradNorm}.
  async adapt(text, { steps = 20, lr = 1e-3, batch = 4, seqLen = 64, holdout = 0.1, seed = 0, onStep } = {}) {
    const r = await this.channel.call('adapt', { request: { text, steps, lr, batch, seqLen, holdout, seed } },
      onStep ?? (() => {}));
    this.info = await this.channel.call('info');
    return r;
  }
  close() { this.channel.close(); }
}

// source: a model directory's URL (or path under Node), or its files as
// {name: ArrayBuffer | Uint8Array}. options: {backend: 'wasm' | 'webgpu',
// threads, worker, distUrl}. With 'webgpu' the forward passes run on the
// GPU (web/src/webgpu/) and the rest in the module (ssm_engine.mjs), in the
// same Worker.
export async function load(source, options = {}) {
  const backend = options.backend ?? 'wasm';
  if (backend !== 'wasm' && backend !== 'webgpu') throw new SsmError(`load: unknown backend '${backend}' (wasm or webgpu)`);
  if (backend === 'webgpu' && !globalThis.navigator?.gpu)
    throw new SsmError("load: backend 'webgpu' needs WebGPU (navigator.gpu): a browser that has it, on a secure page");
  const threads = Math.max(1, options.threads ?? 1);
  if (threads > 1 && !globalThis.crossOriginIsolated && !isNode)
    throw new SsmError('load: threads need a cross-origin isolated page (COOP/COEP headers, scripts/serve-web.sh)');
  const useWorker = options.worker ?? !isNode;
  const files = await readSource(source);
  const channelOptions = { distUrl: options.distUrl, threads };
  const channel = useWorker ? await WorkerChannel.create(channelOptions) : await DirectChannel.create(channelOptions);
  try {
    const info = await channel.call('load', { files, backend });
    return new Model(channel, info, backend);
  } catch (e) {
    channel.close();
    throw e;
  }
}
