#!/usr/bin/env bash
# Kernel timeline of a CUDA program as it runs (graphs and overlapped
# launches included), summarised by step:
#   scripts/cuda-trace/trace.sh OUT_DIR MARKER_REGEX COMMAND...
# e.g. trace.sh /tmp/t embed build/bin/ssm bench M --backend cuda -p 0 -n 64 -b 1 -r 1
# MARKER: a kernel launched once at each step's start (steps.py).
set -euo pipefail
out=$1 marker=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
# libcupti: the toolkit's (lib64 or extras/CUPTI), else a Python wheel's (nvidia-cuda-cupti).
lib=$( (find "$cuda"/ "$cuda"/extras/CUPTI -maxdepth 3 -name 'libcupti.so*'; \
        find / -path /proc -prune -o -name 'libcupti.so*' -print) 2>/dev/null | head -1) || true
inc=$(dirname "$( (find "$cuda"/ -maxdepth 4 -name cupti.h; find "$(dirname "$(dirname "$lib")")" -name cupti.h) \
                  2>/dev/null | head -1)") || true
[ -n "$lib" ] || { echo "trace.sh: no libcupti on this machine" >&2; exit 1; }
mkdir -p "$out"
gcc -std=c11 -O2 -shared -fPIC "$here/kernel_trace.c" -I"$inc" "$lib" -Wl,-rpath,"$(dirname "$lib")" \
  -o "$out/libkernel_trace.so"
SSM_TRACE_OUT="$out/trace.txt" CUDA_INJECTION64_PATH="$out/libkernel_trace.so" "$@" > "$out/stdout.txt"
python3 "$here/steps.py" "$out/trace.txt" "$marker" 20
