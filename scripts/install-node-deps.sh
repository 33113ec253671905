#!/usr/bin/env bash
# Installs the official openai npm client that tests/serve/openai_client_test
# drives ssm serve with, exactly as tests/serve/node/package-lock.json pins it
# (npm ci: from the npm registry, into tests/serve/node/node_modules).
# Node and npm are Debian's nodejs and npm packages (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/../tests/serve/node"
if ! command -v npm >/dev/null; then
  echo "install-node-deps: npm is missing: run scripts/install-deps.sh (Debian's nodejs and npm)" >&2
  exit 1
fi
npm ci --no-audit --no-fund --loglevel=error
