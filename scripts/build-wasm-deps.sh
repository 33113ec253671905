#!/usr/bin/env bash
# Builds the C/C++ libraries the WebAssembly build links, for emscripten,
# into a prefix (default build-wasm-deps/prefix): zlib, PCRE2 and utf8proc
# from Debian's own source packages, compiled directly (their configure
# steps would run hundreds of slow emcc checks) (Debian ships them for the
# host only), and Highway's and nlohmann-json's headers copied from Debian's
# -dev packages into the prefix's include directory (never pointing the
# compiler at /usr/include, whose glibc headers would shadow emscripten's).
# Needs a deb-src entry for `apt-get source` (scripts/install-web-deps.sh
# adds one). Re-running skips libraries already installed in the prefix.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${WASM_DEPS_DIR:-$root/build-wasm-deps}
prefix=$work/prefix
mkdir -p "$work/src" "$prefix/include" "$prefix/lib"
# emscripten's JavaScript optimiser needs Debian's node-acorn.
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}
for tool in emcc emar apt-get; do
  command -v "$tool" >/dev/null || { echo "build-wasm-deps: $tool is missing: run scripts/install-web-deps.sh" >&2; exit 1; }
done
# ccache, where installed, caches the emscripten compiles too.
if command -v ccache >/dev/null; then export EM_COMPILER_WRAPPER=ccache; fi

# source PACKAGE: unpack Debian's source package once, print its directory.
source_dir() {
  local pkg=$1
  local dir
  dir=$(find "$work/src" -maxdepth 1 -type d -name "$pkg-[0-9]*" | head -n1)
  if [[ -z $dir ]]; then
    # The newest version first; a snapshot mirror may lack a security
    # update's sources, so older versions are tried after it.
    local v
    for v in $(apt-cache showsrc "$pkg" | sed -n 's/^Version: //p' | sort -u -r -V); do
      (cd "$work/src" && apt-get source "$pkg=$v" >/dev/null 2>&1) && break
    done
    dir=$(find "$work/src" -maxdepth 1 -type d -name "$pkg-[0-9]*" | head -n1)
  fi
  [[ -n $dir ]] || { echo "build-wasm-deps: apt-get source $pkg failed (is there a deb-src entry?)" >&2; exit 1; }
  echo "$dir"
}

if [[ ! -f $prefix/lib/libz.a ]]; then
  # Debian's zlib source (dfsg) lacks the win32/ files its CMakeLists
  # names: the library's C files compiled directly.
  src=$(source_dir zlib) || exit 1
  echo "build-wasm-deps: zlib" >&2
  mkdir -p "$work/build-zlib"
  cp "$src/zconf.h.in" "$work/build-zlib/zconf.h"  # what zlib's configure would write here
  objs=()
  for c in adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback inffast inflate inftrees trees \
           uncompr zutil; do
    emcc -O3 -DHAVE_UNISTD_H -I"$work/build-zlib" -c "$src/$c.c" -o "$work/build-zlib/$c.o"
    objs+=("$work/build-zlib/$c.o")
  done
  rm -f "$prefix/lib/libz.a" && emar rcs "$prefix/lib/libz.a" "${objs[@]}"
  cp "$src/zlib.h" "$work/build-zlib/zconf.h" "$prefix/include/"
fi
# PCRE2 as its NON-AUTOTOOLS-BUILD notes describe: the generic config.h,
# pcre2.h and character tables, the 8-bit library's files, no JIT.
if [[ ! -f $prefix/lib/libpcre2-8.a ]]; then
  src=$(source_dir pcre2) || exit 1
  echo "build-wasm-deps: pcre2" >&2
  b=$work/build-pcre2
  mkdir -p "$b"
  cp "$src/src/config.h.generic" "$b/config.h"
  cp "$src/src/pcre2.h.generic" "$b/pcre2.h"
  cp "$src/src/pcre2_chartables.c.dist" "$b/pcre2_chartables.c"
  objs=()
  for c in auto_possess chartables compile config context convert dfa_match error extuni find_bracket \
           jit_compile maketables match match_data newline ord2utf pattern_info script_run serialize \
           string_utils study substitute substring tables ucd valid_utf xclass; do
    f=$src/src/pcre2_$c.c
    [[ $c == chartables ]] && f=$b/pcre2_chartables.c
    emcc -O3 -DHAVE_CONFIG_H -DPCRE2_CODE_UNIT_WIDTH=8 -DPCRE2_STATIC -DSUPPORT_UNICODE -I"$b" -I"$src/src" \
      -c "$f" -o "$b/$c.o"
    objs+=("$b/$c.o")
  done
  rm -f "$prefix/lib/libpcre2-8.a" && emar rcs "$prefix/lib/libpcre2-8.a" "${objs[@]}"
  cp "$b/pcre2.h" "$prefix/include/"
fi
if [[ ! -f $prefix/lib/libutf8proc.a ]]; then
  src=$(source_dir utf8proc) || exit 1
  echo "build-wasm-deps: utf8proc" >&2
  mkdir -p "$work/build-utf8proc"
  emcc -O3 -DUTF8PROC_STATIC -c "$src/utf8proc.c" -o "$work/build-utf8proc/utf8proc.o"
  rm -f "$prefix/lib/libutf8proc.a" && emar rcs "$prefix/lib/libutf8proc.a" "$work/build-utf8proc/utf8proc.o"
  cp "$src/utf8proc.h" "$prefix/include/"
fi
# Header-only (for this build): Highway 1.0.3 with static dispatch to its
# WASM target, nlohmann-json.
for d in hwy nlohmann; do
  [[ -d /usr/include/$d ]] || { echo "build-wasm-deps: /usr/include/$d is missing: run scripts/install-deps.sh" >&2; exit 1; }
  rm -rf "$prefix/include/$d" && cp -r "/usr/include/$d" "$prefix/include/$d"
done
echo "build-wasm-deps: done: $prefix" >&2
