// Shared by the wasm tests: the native program (SSM_CLI, the reference),
// the repository's paths, temporary files.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = process.env.SSM_ROOT ?? resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const buildDir = process.env.SSM_BUILD_DIR ?? join(root, 'build');
export const cli = process.env.SSM_CLI ?? join(buildDir, 'ssm');
export const defaultModel = join(root, 'models/default');
// Two of the public goldens (tests/golden/*/notes.json say where they come
// from): HF's Mamba2ForCausalLM, and a hybrid with attention layers.
export const goldenModels = [join(root, 'tests/golden/mamba2_hf_tiny'), join(root, 'tests/golden/hybrid_tiny')];

// `ssm generate` with --print-ids: {promptIds, ids} of this run, given how
// many ids the prompt had (the line holds the prompt's then the new ones).
export function nativeGenerate(model, args, promptCount) {
  const out = execFileSync(cli, ['generate', model, '--print-ids', '-q', ...args], { encoding: 'utf8' });
  const all = out.trim().split(',').filter((s) => s !== '').map(Number);
  return { promptIds: all.slice(0, promptCount), ids: all.slice(promptCount), all };
}

export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'ssm-web-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// A generation's result, with `streamed`: its pieces concatenated.
export async function collect(generation) {
  let streamed = '';
  for await (const piece of generation) streamed += piece;
  return { streamed, ...(await generation.result) };
}
