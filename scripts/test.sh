#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs ctest. Tests
# labelled slow, gpu or web are skipped unless SSM_TEST_ALL=1. Fails when ctest
# finds no test (a build directory configured without them, say).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-node-deps.sh  # the openai npm client the serve tests drive
# SSM_BUILD_TESTS=ON even when the build directory's cache says otherwise.
scripts/build.sh -DSSM_BUILD_TESTS=ON "$@"
build_dir=${BUILD_DIR:-build}
exclude=(-LE "slow|gpu|web")
[ "${SSM_TEST_ALL:-0}" = 1 ] && exclude=()
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$(nproc)" "${exclude[@]}"
