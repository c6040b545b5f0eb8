#!/usr/bin/env bash
# The whole test run: system packages (see setup-system.sh), type check, node + browser projects.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
source scripts/env.sh
npx tsc --noEmit -p .
npx vitest run "$@"
