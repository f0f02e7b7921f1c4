#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time: scripts/fuzz.sh [seconds per target, default 60].
# Needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz). Not part of CI or
# npm test. A crash stops the script and leaves its input in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "needs the nightly toolchain and cargo-fuzz: rustup toolchain install nightly; cargo install cargo-fuzz" >&2
  exit 1
fi

seconds="${1:-60}"
for target in keys context_key classify; do
  echo "== fuzz $target (${seconds}s)"
  mkdir -p "corpus/$target"
  args=(-max_total_time="$seconds" -print_final_stats=1)
  if [[ -f "dicts/$target.dict" ]]; then
    args+=(-dict="dicts/$target.dict")
  fi
  # The first directory collects the growing corpus; the seeds are read only.
  cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- "${args[@]}"
done
