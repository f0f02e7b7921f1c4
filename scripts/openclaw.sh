#!/usr/bin/env bash
# Puts OpenClaw's published implementation of the feature where scripts and tests can run it:
# the npm package `openclaw` at a pinned version, unpacked into .tmp/openclaw/package (outside
# git), with only the packages its session-state and upstream-link chunks and their callers
# (scripts/openclaw-swap.mjs) load installed into .tmp/openclaw/node_modules, above its dist/.
# Node 24 (OpenClaw needs node:sqlite) comes from scripts/node24.sh. Everything is cached: a
# second run checks the marker file and returns.
#
# The package is not `npm install`ed: its ~60 dependencies include browser drivers and
# model-provider SDKs, and none of them is reached by the chunks used here except the ones
# installed below, at the versions openclaw's own package.json pins.
#
# Prints the Node 24 binary and the package directory on its last two lines
# (`node24=…`, `openclaw=…`); scripts/openclaw/load.mjs loads the chunks from there.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

version=2026.9.6
cache=$root/.tmp/openclaw
pkg=$cache/package
# The suffix changes when the installed set does: an older cache is then filled again.
marker=$cache/ready-$version-callers
node24=$root/.tmp/node24/node/bin/node

bash scripts/node24.sh --install-only >/dev/null

if [ ! -f "$marker" ]; then
  echo "openclaw: fetching openclaw@$version into .tmp/openclaw (once)"
  start=$(date +%s)
  rm -rf "$cache/package" "$cache/node_modules" "$cache/download" "$cache"/ready-*
  mkdir -p "$cache/download"
  (cd "$cache/download" && npm pack "openclaw@$version" --silent >/dev/null)
  tar -xzf "$cache/download/openclaw-$version.tgz" -C "$cache"

  # The chunks' runtime imports, at the versions openclaw pins: the session-state chunk and the
  # state database first, then what the callers scripts/openclaw-swap.mjs drives load (the
  # session tools, the reply path, and the model SDKs @openclaw/ai imports at load; no model is
  # called).
  deps=(semver @openclaw/fs-safe chalk tslog ms p-map json5 dotenv commander import-meta-resolve
    typebox hosted-git-info acorn openai partial-json ws zod
    execa @openclaw/proxyline rastermill entities minimatch yaml p-limit pretty-ms ignore
    @earendil-works/pi-tui diff @clack/prompts @anthropic-ai/sdk @google/genai @mistralai/mistralai)
  specs=()
  for dep in "${deps[@]}"; do
    specs+=("$dep@$("$node24" -p 'const p = require(process.argv[1]); p.dependencies[process.argv[2]]' \
      "$pkg/package.json" "$dep")")
  done
  printf '{ "private": true }\n' >"$cache/package.json"
  (cd "$cache" && npm install --no-save --ignore-scripts --no-audit --no-fund --silent "${specs[@]}")

  # Two large packages of which only a few files are reached: unpacked without their
  # dependencies.
  for spec in "@openclaw/ai@$version" "@modelcontextprotocol/sdk@1.30.0"; do
    name=${spec%@*}
    tgz=$(cd "$cache/download" && npm pack "$spec" --silent | tail -n 1)
    mkdir -p "$cache/node_modules/$name"
    tar -xzf "$cache/download/$tgz" -C "$cache/node_modules/$name" --strip-components=1
  done
  rm -rf "$cache/download"
  echo "$version" >"$marker"
  echo "openclaw: ready in $(($(date +%s) - start)) s"
fi

echo "node24=$node24"
echo "openclaw=$pkg"
