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
cupti=$(dirname "$(find "$cuda"/ "$cuda"/extras/CUPTI -maxdepth 3 -name 'libcupti.so' 2>/dev/null | head -1)")
inc=$(dirname "$(find "$cuda"/ -maxdepth 4 -name cupti.h 2>/dev/null | head -1)")
mkdir -p "$out"
gcc -std=c11 -O2 -shared -fPIC "$here/kernel_trace.c" -I"$inc" -L"$cupti" -lcupti -Wl,-rpath,"$cupti" \
  -o "$out/libkernel_trace.so"
SSM_TRACE_OUT="$out/trace.txt" CUDA_INJECTION64_PATH="$out/libkernel_trace.so" "$@" > "$out/stdout.txt"
python3 "$here/steps.py" "$out/trace.txt" "$marker" 20
