#!/usr/bin/env bash
# The whole test run: system packages (see setup-system.sh), type check (TypeScript, then the Svelte components),
# node + browser projects.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
npx tsc --noEmit -p .
npx svelte-check --tsconfig ./tsconfig.json --fail-on-warnings
mkdir -p .cache
status=0
npx vitest run --reporter=default --reporter=json --outputFile.json=.cache/vitest-report.json "$@" || status=$?
# the plain closing line CI reads: "N passed, N failed, N skipped"
node -e '
  const r = JSON.parse(require("fs").readFileSync(".cache/vitest-report.json", "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' || true
exit $status
