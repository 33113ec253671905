#!/usr/bin/env bash
# The main job, as root on a fresh Debian 12: installs the packages, builds
# the program and generates text with the built-in default model. One line
# per step; each step's full output goes to BUILD_DIR/logs/ (default build/)
# and is shown when the step fails. Extra arguments go to `ssm generate`.
#
# It configures the same build directory scripts/test.sh uses, tests
# included, and builds only the program, so that test.sh afterwards builds
# the rest and runs the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
logs="$build_dir/logs"
mkdir -p "$logs"

# step DESCRIPTION LOG_NAME COMMAND...
step() {
  local what=$1 log="$logs/$2.log"
  shift 2
  printf '%s ... ' "$what"
  if "$@" >"$log" 2>&1; then
    echo "done"
  else
    local rc=$?
    echo "failed (exit $rc); its output ($log):"
    tail -n 60 "$log"
    exit "$rc"
  fi
}

step "installing packages" install scripts/install-deps.sh
step "configuring $build_dir" configure \
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}"
step "building ssm" build cmake --build "$build_dir" --target ssm_cli -j "$(nproc)"
if [ $# -eq 0 ]; then set -- --prompt "And God said" --max-tokens 200 --echo; fi
echo "generating with the built-in model: ssm generate ${*@Q}"
exec "$build_dir/ssm" generate "$@"
