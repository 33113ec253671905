#!/usr/bin/env bash
# Downloads (does not install) the Debian 12 packages of the libraries that
# a bare GPU machine lacks - OpenBLAS, nlohmann-json, PCRE2, utf8proc, CLI11,
# libzip, Highway, GoogleTest, Google Benchmark, cpp-httplib and what their
# headers pull in - into DIR (default .carry/debs), for the GPU check
# scripts' DEPS_DIR (scripts/cuda-deps.sh unpacks them there). Run it here,
# where apt reaches Debian's archive; the device machine reaches nothing.
#   scripts/download-gpu-debs.sh [DIR]
set -euo pipefail
dir=${1:-.carry/debs}
mkdir -p "$dir"
cd "$dir"
packages=(
  libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
  nlohmann-json3-dev libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libutf8proc-dev libutf8proc2 libcli11-dev libzip-dev libzip4 zlib1g-dev libhwy-dev libhwy1
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libbrotli-dev libbz2-dev liblzma-dev libzstd-dev
)
apt-get download "${packages[@]}"
echo "download-gpu-debs.sh: $(ls ./*.deb | wc -l) packages in $dir ($(du -sh . | cut -f1))"
