// Types of web/src/ssm.mjs: the ssm engine in JavaScript (WebAssembly, or
// WebGPU where web/src/webgpu/ provides it).

/** An error of the engine (bad input, a file that is not a model, a state
 * of another model): the message is the engine's own. */
export class SsmError extends Error {}

/** A model directory's files by name (config.json, model.safetensors or
 * the shards an index names, tokenizer.json, generation_config.json). */
export type ModelFiles = Record<string, ArrayBuffer | ArrayBufferView | string>;

export interface LoadOptions {
  /** "wasm" (default): the CPU backend compiled to WebAssembly. "webgpu":
   * the forward passes on the WebGPU backend (web/src/webgpu/), the
   * tokenizer, options, sampling and state files in the WebAssembly module,
   * so generate/state/restore behave as with "wasm"; needs navigator.gpu
   * (rejected otherwise, and under Node); inference only (adapt rejects,
   * score runs in the module). */
  backend?: 'wasm' | 'webgpu';
  /** Threads of the engine's pool; more than 1 needs the pthreads build
   * (web/dist/mt/) and a cross-origin isolated page. Default 1. */
  threads?: number;
  /** Run the engine in a Worker (default in a page; Node: in this thread). */
  worker?: boolean;
  /** Where ssm_wasm.mjs and ssm_wasm.wasm are (default ../dist/ beside this module). */
  distUrl?: string | URL;
}

/** The sampling options of `ssm generate`, with its defaults. snake_case
 * names (max_tokens, top_k, ...) are accepted too. */
export interface GenerateOptions {
  /** Most new tokens (default 256; 0 only reads the prompt). */
  maxTokens?: number;
  /** 0 is greedy (default 0.8). */
  temperature?: number;
  /** Default 40; 0 is off. */
  topK?: number;
  /** Default 0.95; 1 is off. */
  topP?: number;
  /** Default 0.05; 0 is off. */
  minP?: number;
  /** Default 1 (off). */
  repeatPenalty?: number;
  /** Default 64. */
  repeatLastN?: number;
  /** Default 0. */
  seed?: number;
  /** Stop when the text contains one of these (not part of the output). */
  stop?: string[];
  /** Stop after one of these token ids. */
  stopIds?: number[];
  /** Do not stop at the end-of-text token. */
  ignoreEos?: boolean;
  /** Encode a fresh prompt without the tokenizer's special tokens. */
  noSpecial?: boolean;
}

export interface GenerationStats {
  prefillTokens: number;
  prefillSeconds: number;
  decodeTokens: number;
  decodeSeconds: number;
}

export interface GenerationResult {
  /** The prompt as token ids (after a pending token of the session, if any). */
  promptIds: number[];
  /** The new token ids, a stop token included. */
  ids: number[];
  text: string;
  finish: 'length' | 'stop_token' | 'stop_string' | 'interrupted' | string;
  seed: number;
  stats: GenerationStats;
  /** Tokens consumed into the session's state so far. */
  consumed: number;
}

/** Iterate for the text pieces as they are generated. */
export interface Generation extends AsyncIterable<string> {
  /** The whole generation's outcome, once it ends (rejects as the iterator does). */
  readonly result: Promise<GenerationResult>;
}

export interface ModelInfo {
  vocabSize: number;
  layers: number;
  /** The model's fingerprint, as state files record it. */
  fingerprint: string;
  consumed: number;
  pending: number;
  threads: number;
  backend: 'wasm' | 'webgpu';
}

export interface HeldOutScore {
  tokens: number;
  loss: number;
  perplexity: number;
  bitsPerByte: number;
}

export interface AdaptOptions {
  /** Optimizer steps (default 20). */
  steps?: number;
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Windows per step (default 4). */
  batch?: number;
  /** Tokens per window (default 64). */
  seqLen?: number;
  /** Fraction of the text held out for the loss before and after (default 0.1). */
  holdout?: number;
  seed?: number;
  onStep?: (step: { step: number; loss: number; lr: number; gradNorm: number }) => void;
}

export interface AdaptResult {
  steps: { step: number; loss: number; lr: number; gradNorm: number }[];
  heldOutBefore: HeldOutScore;
  heldOutAfter: HeldOutScore;
}

export class Model {
  readonly backend: 'wasm' | 'webgpu';
  info: ModelInfo;
  /** Continues the model's session (text in, text pieces out; ids in, ids as the result). */
  generate(prompt: string | number[], options?: GenerateOptions): Generation;
  /** The session as the bytes of a state file: what `ssm generate --session` reads and writes. */
  state(): Promise<Uint8Array>;
  /** Continue from a state file's bytes; rejects for a state of another model or damaged bytes. */
  restore(bytes: ArrayBuffer | Uint8Array): Promise<void>;
  /** A fresh session. */
  reset(): Promise<void>;
  /** Next-token loss of text, as `ssm score --all`. */
  score(text: string, options?: { seqLen?: number }): Promise<HeldOutScore>;
  tokenize(text: string): Promise<number[]>;
  /** WSLA fast-adapt on text (the model's weights change; older states no
   * longer match it). Backend "wasm" only. */
  adapt(text: string, options?: AdaptOptions): Promise<AdaptResult>;
  /** Ends the model's engine: its Worker, or (in the calling thread) the
   * pthreads build's pool Workers, which would otherwise keep a Node
   * process alive. The model takes no calls after it. */
  close(): void;
}

/** Load a model directory from a URL (a path under Node) or from its files. */
export function load(source: string | URL | ModelFiles, options?: LoadOptions): Promise<Model>;
