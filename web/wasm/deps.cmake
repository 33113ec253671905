# The libraries of the WebAssembly build, from the prefix that
# scripts/build-wasm-deps.sh fills (SSM_WASM_DEPS, default
# build-wasm-deps/prefix), declared as the targets the host build gets from
# pkg-config and find_package, so that the module libraries link the same
# names in both builds.
set(SSM_WASM_DEPS ${PROJECT_SOURCE_DIR}/build-wasm-deps/prefix CACHE PATH
    "prefix holding the emscripten builds of zlib, PCRE2, utf8proc and the Highway/nlohmann-json headers")
if(NOT EXISTS ${SSM_WASM_DEPS}/lib/libutf8proc.a OR NOT EXISTS ${SSM_WASM_DEPS}/include/hwy/highway.h)
  message(FATAL_ERROR "${SSM_WASM_DEPS}: no WebAssembly dependencies there; run scripts/build-wasm-deps.sh")
endif()

# Every object: WASM SIMD128 (Highway's WASM target), C++ exceptions caught
# (the engine reports errors by throwing ssm::Error), and with
# SSM_WASM_THREADS the pthreads build (shared memory, a worker pool; needs a
# cross-origin isolated page).
option(SSM_WASM_THREADS "WebAssembly with pthreads and a worker pool" OFF)
# Native WebAssembly exceptions (Node 20, Chromium; the default): a call
# that may throw costs nothing until it throws. emscripten's JavaScript-based
# exceptions (OFF: for engines without them) route every such call through
# a JavaScript trampoline, which made decoding 2-3 times slower.
option(SSM_WASM_NATIVE_EXCEPTIONS "WebAssembly exception handling instead of emscripten's JavaScript one" ON)
if(SSM_WASM_NATIVE_EXCEPTIONS)
  set(ssm_wasm_eh -fwasm-exceptions)
else()
  set(ssm_wasm_eh -fexceptions)
endif()
add_compile_options(-msimd128 ${ssm_wasm_eh})
add_link_options(${ssm_wasm_eh})
if(SSM_WASM_THREADS)
  add_compile_options(-pthread)
  add_link_options(-pthread)
endif()

# wasm_dep(TARGET [LIBRARY] [DEFINITIONS...]): an imported target of the
# prefix's headers and, when named, its static library.
function(wasm_dep target lib)
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE ${SSM_WASM_DEPS}/include)
  if(lib)
    target_link_libraries(${target} INTERFACE ${SSM_WASM_DEPS}/lib/${lib})
  endif()
  if(ARGN)
    target_compile_definitions(${target} INTERFACE ${ARGN})
  endif()
endfunction()

wasm_dep(nlohmann_json::nlohmann_json "")
# Highway with one target, WASM SIMD128, chosen at compile time: no runtime
# dispatch, so libhwy's target detection is not needed.
wasm_dep(PkgConfig::HWY "" HWY_COMPILE_ONLY_STATIC=1)
wasm_dep(ZLIB::ZLIB libz.a)
# No libzip: src/io/pytorch_archive.cpp is replaced by web/wasm/no_pytorch.cpp.
wasm_dep(PkgConfig::LIBZIP "")
wasm_dep(PkgConfig::PCRE2 libpcre2-8.a PCRE2_STATIC=1)
wasm_dep(PkgConfig::UTF8PROC libutf8proc.a UTF8PROC_STATIC=1)
