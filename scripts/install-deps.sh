#!/usr/bin/env bash
# Installs every Debian package the build, tests and benchmarks need.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcli11-dev
  libzip-dev libhwy-dev libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-setuptools
  libcpp-httplib-dev
)
# Node and npm run the server's OpenAI-client test. A machine may already
# have them from another source (NodeSource's nodejs bundles npm and
# conflicts with Debian's npm package): Debian's only where they are absent.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
