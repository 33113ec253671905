// Runs gemv_streams.c's variants (see there) in this Node thread, interleaved,
// and prints the median multiply-adds per second of each, by the thread's CPU
// time (Linux's schedstat), for the decode shapes of the built-in model.
//   node bench/wasm/gemv_streams.mjs /tmp/gemv_streams.mjs [rounds]
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';

const file = resolve(process.argv[2] ?? '/tmp/gemv_streams.mjs');
const rounds = Number(process.argv[3] ?? 9);
// emscripten 3.1.6's ES module still uses CommonJS's require and __dirname.
globalThis.require = createRequire(file);
globalThis.__dirname = dirname(file);
const M = await (await import(file)).default({ wasmBinary: readFileSync(file.replace(/\.mjs$/, '.wasm')) });
const cpu = () => Number(readFileSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e9;
const names = ['4 neighbouring rows', '4 rows far apart', 'one row at a time'];
const shapes = [[1536, 256], [256, 512], [256, 256]];  // n x K: in_proj, out_proj, lm_head
const results = new Map();
for (let w = 0; w < 3; ++w) for (const [n, K] of shapes) M._gemv_streams(w, n, K, 500, 1);  // warm-up
for (let round = 0; round < rounds; ++round)
  for (const streaming of [1, 0])
    for (const [n, K] of shapes)
      for (let w = 0; w < 3; ++w) {
        const reps = Math.round(3e8 / (n * K));
        const t0 = cpu();
        M._gemv_streams(w, n, K, reps, streaming);
        const key = `${streaming ? 'streaming' : 'in cache '} ${n}x${K} ${names[w]}`;
        if (!results.has(key)) results.set(key, []);
        results.get(key).push((n * K * reps) / (cpu() - t0) / 1e9);
      }
for (const [key, v] of results) console.log(key.padEnd(48), v.sort((a, b) => a - b)[v.length >> 1].toFixed(2), 'G multiply-adds/s');
