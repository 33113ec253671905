// The Worker (a page's module Worker, or a Node worker_thread) that runs the
// WebAssembly engine for web/src/ssm.mjs, so that a long generation never
// blocks the page. Messages in: {id, op, args}; out: {id, event} for
// streamed pieces and training steps, then {id, result} or {id, error}.
import { Engine } from './ssm_engine.mjs';

const port = await (async () => {
  if (typeof self === 'object' && typeof self.postMessage === 'function') {
    return { post: (m, t) => self.postMessage(m, t ?? []), on: (f) => { self.onmessage = (e) => f(e.data); } };
  }
  const { parentPort } = await import('node:worker_threads');
  return { post: (m, t) => parentPort.postMessage(m, t ?? []), on: (f) => parentPort.on('message', f) };
})();

let engine = null;

const ops = {
  async init({ distUrl, threads }) {
    engine = await Engine.create({ distUrl, threads });
    return { threads };
  },
  load: ({ files, backend }) => engine.load(files, backend),
  info: () => engine.info(),
  reset: () => engine.reset(),
  generate: async ({ request }, emit) => {
    // The pieces made within a frame (16 ms) go in one message: a message
    // per token (a structured clone, a task for the page's thread) cost
    // more than the text is worth at hundreds of tokens a second.
    let text = '', posted = -Infinity;
    const result = await engine.generate(request, (piece) => {
      text += piece;
      const now = performance.now();
      if (now - posted < 16) return;
      emit(text);
      text = '';
      posted = now;
    });
    if (text) emit(text);
    return result;
  },
  state: () => engine.state(),
  restore: ({ bytes }) => engine.restore(bytes),
  score: ({ request }) => engine.score(request),
  adapt: ({ request }, emit) => engine.adapt(request, (step) => emit(step)),
  tokenize: ({ text }) => engine.tokenize(text),
};

port.on(async ({ id, op, args }) => {
  try {
    if (!ops[op]) throw new Error(`unknown operation '${op}'`);
    if (op !== 'init' && !engine) throw new Error('the engine is not initialised');
    const result = await ops[op](args ?? {}, (event) => port.post({ id, event }));
    port.post({ id, result });
  } catch (e) {
    port.post({ id, error: e?.message ?? String(e) });
  }
});
port.post({ ready: true });
