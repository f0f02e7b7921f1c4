#!/usr/bin/env bash
# The whole test gate, in order: Rust format and lints, Rust tests, the release addon, the
# type check, then Jest. Every step must pass.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== napi build"
npm run build --silent
echo "== tsc --noEmit"
npx tsc -p tsconfig.json
echo "== jest"
mkdir -p .tmp
status=0
npx jest --runInBand --json --outputFile=.tmp/jest-results.json || status=$?
node -e '
  const r = require("./.tmp/jest-results.json");
  console.log(`jest: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);
'
exit "$status"
