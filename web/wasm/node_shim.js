// Prepended to the generated ES module (emscripten --extern-pre-js): under
// Node, the require and __dirname its loader expects of a CommonJS script.
// In a browser nothing is imported.
const ssmIsNode = typeof process == 'object' && typeof process.versions == 'object' &&
  typeof process.versions.node == 'string';
const require = ssmIsNode ? (await import('node:module')).createRequire(import.meta.url) : undefined;
const __dirname = ssmIsNode ? require('node:path').dirname(require('node:url').fileURLToPath(import.meta.url)) : '';
