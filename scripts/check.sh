#!/usr/bin/env bash
# `make check`: the fast loop. Formatting, clippy on the native build and on
# the wasm Worker, and the native tests (unit, store, engine, http); no Worker
# build and no end-to-end run (`make test` runs everything).
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

bash scripts/setup.sh
use_tools_path
export PATH="$PATH:$TOOLS_DIR/promtool"

log "format and lint"
cargo fmt --all -- --check || die "cargo fmt found unformatted code: run cargo fmt --all"
cargo clippy --quiet --workspace --all-targets --features mqlite-edge/native -- -D warnings \
  || die "clippy found warnings"
if [ "$(cat "$WASM_TOOLCHAIN_DIR/mode")" = rustup ]; then
  # The Worker shell only compiles for wasm32: lint it there too.
  CARGO_TARGET_DIR="$REPO_ROOT/target/wasm-check" \
    cargo clippy --quiet --target wasm32-unknown-unknown --lib -- -D warnings \
    || die "clippy found warnings in the wasm build"
else
  log "the wasm lint needs rustup's wasm32 target; this machine builds wasm with Debian's" \
    "rustc-web (build-std), which cannot run clippy: linted natively only"
fi

log "native tests (unit, store, engine, http)"
MQLITE_REQUIRE_PROMTOOL=1 cargo test --workspace --exclude mqlite-e2e --features mqlite-edge/native
# The end-to-end crate's own helpers (the fault proxy's counters).
cargo test --quiet -p mqlite-e2e --lib
