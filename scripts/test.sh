#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs ctest. Tests
# labelled slow or gpu are skipped unless SSM_TEST_ALL=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh "$@"
build_dir=${BUILD_DIR:-build}
exclude=(-LE "slow|gpu")
[ "${SSM_TEST_ALL:-0}" = 1 ] && exclude=()
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "${exclude[@]}"
