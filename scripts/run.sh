#!/usr/bin/env bash
# The main job: installs what is needed, builds, and generates text with the
# built-in default model. Extra arguments go to `ssm generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DSSM_BUILD_TESTS=OFF -DSSM_BUILD_BENCH=OFF
if [ $# -eq 0 ]; then set -- --prompt "And God said" --max-tokens 200; fi
exec build/ssm generate models/default "$@"
