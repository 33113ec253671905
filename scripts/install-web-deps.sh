#!/usr/bin/env bash
# Installs what the browser build and its tests need (as root, Debian 12):
# emscripten (with node-acorn, which its JavaScript optimiser loads from
# /usr/share/nodejs), Node and npm, Debian's chromium for the page tests, a
# deb-src entry so that scripts/build-wasm-deps.sh can `apt-get source`
# zlib, PCRE2 and utf8proc, and puppeteer-core from npm exactly as
# web/package-lock.json pins it (npm ci, into web/node_modules). puppeteer
# drives Debian's /usr/bin/chromium: it never downloads a browser of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
sources=/etc/apt/sources.list.d/debian.sources
if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  if [[ -f $sources ]]; then
    sed -i 's/^Types: deb$/Types: deb deb-src/' "$sources"
  else
    echo "deb-src http://deb.debian.org/debian bookworm main" >/etc/apt/sources.list.d/ssm-deb-src.list
  fi
fi
apt-get update -qq
# Node and npm from Debian only where there are none: NodeSource's nodejs
# package ships npm and conflicts with Debian's, and apt refuses both.
node_pkgs=""
command -v npm >/dev/null || node_pkgs="nodejs npm"
apt-get install -y -qq --no-install-recommends emscripten node-acorn $node_pkgs chromium dpkg-dev \
  libhwy-dev nlohmann-json3-dev >/dev/null
(cd web && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
echo "install-web-deps: done (emcc $(emcc --version | awk 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9]+[.][0-9]+[.][0-9]+$/) print $i }'), chromium at $(command -v chromium))" >&2
