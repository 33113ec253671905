// The WebAssembly engine in the thread that runs it (a Worker in a page, the
// calling thread or a worker_thread in Node): the emscripten module of
// web/dist/, model files written into its in-memory file system, and the
// results of web/wasm/ (model_module.h) turned into values or thrown SsmErrors.
// web/src/ssm.mjs is the public API over it.
//
// With backend 'webgpu' the forward passes run on the WebGPU backend
// (web/src/webgpu/model.mjs) and the module does the rest as for 'wasm':
// the request's options, the tokenizer, the sampler, stop tokens and
// strings, the text, and the state files (the GPU's state tensors go
// through the module's own writer and reader), so generate(), state() and
// restore() give what the wasm backend and the CLI give.

export class SsmError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SsmError';
  }
}

const isNode = typeof process === 'object' && typeof process.versions?.node === 'string';

// An engine result: {json} parsed, {error} thrown, anything else as is.
function unwrap(v) {
  if (v && typeof v === 'object' && !(v instanceof Uint8Array)) {
    if (typeof v.error === 'string') throw new SsmError(v.error);
    if (typeof v.json === 'string') return JSON.parse(v.json);
  }
  return v;
}

let modelCount = 0;

export class Engine {
  // distUrl: the URL of the directory holding ssm_wasm.mjs and .wasm.
  static async create({ distUrl, threads = 1 } = {}) {
    const base = new URL(distUrl ?? new URL('../dist/', import.meta.url));
    const variant = threads > 1 ? new URL('mt/', base) : base;
    const { default: createSsmModule } = await import(new URL('ssm_wasm.mjs', variant).href);
    const opts = {
      print: () => {},
      printErr: (line) => { if (globalThis.SSM_DEBUG) console.warn(line); },
    };
    if (isNode) {
      // Node without its experimental fetch: the .wasm read from disk.
      const { readFile } = await import('node:fs/promises');
      opts.wasmBinary = await readFile(new URL('ssm_wasm.wasm', variant));
    } else {
      opts.locateFile = (name) => new URL(name, variant).href;
    }
    const module = await createSsmModule(opts);
    return new Engine(module, threads);
  }

  constructor(module, threads) {
    this.module = module;
    this.threads = threads;
    this.model = null;
  }

  // files: {name: Uint8Array | ArrayBuffer} of one model directory;
  // backend: 'wasm' or 'webgpu' (the weights are then uploaded to the GPU
  // too: the module keeps its copy for the state files' fingerprint).
  async load(files, backend = 'wasm') {
    const FS = this.module.FS;
    const dir = `/models/m${++modelCount}`;
    FS.mkdirTree(dir);
    for (const [name, data] of Object.entries(files)) {
      if (name.includes('/') || name === '..' || name === '.') throw new SsmError(`load: bad file name '${name}'`);
      FS.writeFile(`${dir}/${name}`, data instanceof Uint8Array ? data : new Uint8Array(data));
    }
    if (this.model) this.model.delete();
    this.model = null;
    this.gpu = null;
    const model = new this.module.Model();
    const info = unwrap(model.load(dir, this.threads));
    if (backend === 'webgpu') {
      const webgpu = await import('./webgpu/model.mjs');
      try {
        this.gpu = await webgpu.load(files);
      } catch (e) {
        model.delete();
        throw new SsmError(`load: backend 'webgpu': ${e.message}`);
      }
    } else if (backend !== 'wasm') {
      model.delete();
      throw new SsmError(`load: unknown backend '${backend}' (wasm or webgpu)`);
    }
    this.model = model;
    this.backend = backend;
    return { ...info, backend };
  }

  #m() {
    if (!this.model) throw new SsmError('no model is loaded');
    return this.model;
  }

  info() { return { ...unwrap(this.#m().info()), backend: this.backend }; }
  reset() {
    const info = unwrap(this.#m().reset());
    if (this.gpu) this.gpu.reset(1);
    return { ...info, backend: this.backend };
  }
  generate(request, onPiece = () => {}) {
    if (this.gpu) return this.#generateOnGpu(request, onPiece);
    return unwrap(this.#m().generate(JSON.stringify(request), (json) => onPiece(JSON.parse(json))));
  }
  async state() {
    const m = this.#m();
    if (this.gpu) {
      // The GPU's state into the module's session, then its state file.
      const { tensors } = await this.gpu.exportState();
      for (const t of tensors)
        unwrap(m.setStateTensor(t.name, JSON.stringify(t.shape), new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)));
    }
    return unwrap(m.state());
  }
  restore(bytes) {
    const m = this.#m();
    const info = unwrap(m.restore(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)));
    if (this.gpu) {
      // The module checked the file (fingerprint, shapes, checksum); its
      // tensors go to the GPU.
      const { tensors, position } = unwrap(m.stateTensors());
      this.gpu.importState({
        position,
        tensors: tensors.map((t) => ({
          name: t.name, dtype: t.dtype, shape: JSON.parse(t.shape),
          data: t.dtype === 'I64' ? new BigInt64Array(t.data.buffer) : new Float32Array(t.data.buffer),
        })),
      });
    }
    return { ...info, backend: this.backend };
  }
  score(request) { return unwrap(this.#m().score(JSON.stringify(request))); }
  adapt(request, onStep) {
    if (this.gpu) throw new SsmError("adapt: the webgpu backend runs inference only; load the model with backend 'wasm' to adapt it");
    return unwrap(this.#m().adapt(JSON.stringify(request), onStep ? (j) => onStep(JSON.parse(j)) : undefined));
  }

  // generate() with the forward passes on the GPU and everything else in
  // the module (web/wasm/webgpu_handover.cpp, externalBegin): a greedy run without
  // a repetition penalty takes the GPU's argmax and reads back 4 bytes per
  // token; any other run reads the last logits back for the module's
  // sampler, so seeded sampling draws what the CLI draws.
  async #generateOnGpu(request, onPiece) {
    const m = this.#m(), gpu = this.gpu;
    const begin = unwrap(m.externalBegin(JSON.stringify(request)));
    const timings = { prefillSeconds: 0, decodeSeconds: 0 };
    const now = () => (globalThis.performance ?? Date).now() / 1000;
    const choose = async (ids) => {
      if (begin.argmaxOnly) {
        const [id] = await gpu.next(ids, 1, ids.length ?? 1, { temperature: 0 });
        return unwrap(m.externalStep(id));
      }
      const logits = await gpu.lastLogits(ids);
      m.externalLogits().set(logits);
      return unwrap(m.externalStep(-1));
    };
    try {
      let t0 = now();
      if (begin.maxTokens === 0) {
        if (begin.feed.length) await gpu.feed(begin.feed);
        timings.prefillSeconds = now() - t0;
      } else {
        let step = await choose(begin.feed);
        timings.prefillSeconds = now() - t0;
        t0 = now();
        for (;;) {
          if (step.piece) onPiece(step.piece);
          if (step.done) break;
          // The argmax is already on the GPU: the next step reads it there.
          step = await choose(begin.argmaxOnly ? gpu.tokens : [step.token]);
        }
        timings.decodeSeconds = now() - t0;
      }
    } catch (e) {
      m.externalAbort();
      throw e instanceof SsmError ? e : new SsmError(`generate (webgpu): ${e.message}`);
    }
    const { piece, ...result } = unwrap(m.externalEnd(JSON.stringify(timings)));
    if (piece) onPiece(piece);
    return result;
  }
  tokenize(text) { return unwrap(this.#m().tokenize(text)); }
  // Ends the engine. The pthreads build's pool Workers (emscripten 3.1.6
  // neither unrefs nor ends them) would keep a Node process alive after
  // its last line, so they are ended here: the engine takes no more calls.
  close() {
    if (this.model) this.model.delete();
    this.model = null;
    this.module.PThread?.terminateAllThreads();
  }
}
