#!/usr/bin/env bash
# Builds the engine as WebAssembly: web/dist/ssm_wasm.mjs (an ES module) and
# web/dist/ssm_wasm.wasm, single-threaded by default (`scripts/build-wasm.sh
# mt`: the pthreads build, web/dist/mt/, for cross-origin isolated pages).
# The CPU backend without BLAS (its portable kernels, Highway's WASM SIMD128
# target). Needs scripts/install-web-deps.sh and scripts/build-wasm-deps.sh
# (run here when its prefix is missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
variant=${1:-st}
case $variant in
  st) out=web/dist ;;
  mt) out=web/dist/mt ;;
  *) echo "build-wasm: unknown variant '$variant' (st or mt)" >&2; exit 2 ;;
esac
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}  # emscripten's optimiser needs node-acorn
if command -v ccache >/dev/null; then
  export EM_COMPILER_WRAPPER=ccache CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
fi
[[ -f build-wasm-deps/prefix/lib/libutf8proc.a ]] || scripts/build-wasm-deps.sh
cmake --preset "wasm-$variant" >/dev/null
cmake --build --preset "wasm-$variant" -j "${JOBS:-$(nproc)}"
mkdir -p "$out"
cp "build-wasm-$variant/ssm_wasm.mjs" "build-wasm-$variant/ssm_wasm.wasm" "$out/"
if [[ -f build-wasm-$variant/ssm_wasm.worker.js ]]; then
  cp "build-wasm-$variant/ssm_wasm.worker.js" "$out/"
  # The pthreads' worker script is CommonJS; web/package.json makes every
  # .js below it an ES module for Node unless this folder says otherwise.
  echo '{"type": "commonjs"}' >"$out/package.json"
fi
echo "build-wasm: $out/ssm_wasm.mjs, $out/ssm_wasm.wasm" >&2
