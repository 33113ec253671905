// The WebAssembly engine in the thread that runs it (a Worker in a page, the
// calling thread or a worker_thread in Node): the emscripten module of
// web/dist/, model files written into its in-memory file system, and the
// results of web/wasm/ssm_wasm.cpp turned into values or thrown SsmErrors.
// web/src/ssm.mjs is the public API over it.

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

  // files: {name: Uint8Array | ArrayBuffer} of one model directory.
  load(files) {
    const FS = this.module.FS;
    const dir = `/models/m${++modelCount}`;
    FS.mkdirTree(dir);
    for (const [name, data] of Object.entries(files)) {
      if (name.includes('/') || name === '..' || name === '.') throw new SsmError(`load: bad file name '${name}'`);
      FS.writeFile(`${dir}/${name}`, data instanceof Uint8Array ? data : new Uint8Array(data));
    }
    if (this.model) this.model.delete();
    this.model = new this.module.Model();
    return unwrap(this.model.load(dir, this.threads));
  }

  #m() {
    if (!this.model) throw new SsmError('no model is loaded');
    return this.model;
  }

  info() { return unwrap(this.#m().info()); }
  reset() { return unwrap(this.#m().reset()); }
  generate(request, onPiece = () => {}) {
    return unwrap(this.#m().generate(JSON.stringify(request), (json) => onPiece(JSON.parse(json))));
  }
  state() { return unwrap(this.#m().state()); }
  restore(bytes) { return unwrap(this.#m().restore(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes))); }
  score(request) { return unwrap(this.#m().score(JSON.stringify(request))); }
  adapt(request, onStep) {
    return unwrap(this.#m().adapt(JSON.stringify(request), onStep ? (j) => onStep(JSON.parse(j)) : undefined));
  }
  tokenize(text) { return unwrap(this.#m().tokenize(text)); }
  close() {
    if (this.model) this.model.delete();
    this.model = null;
  }
}
