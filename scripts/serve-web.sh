#!/usr/bin/env bash
# Serves the repository's web/ page on loopback (default port 8765) with
# the headers that make it cross-origin isolated (COOP same-origin, COEP
# require-corp: SharedArrayBuffer, hence the pthreads build), and the
# built-in model under /models/default/. Open http://127.0.0.1:PORT/web/
# after scripts/build-wasm.sh. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
exec node scripts/serve-web.mjs "${1:-8765}"
