#!/usr/bin/env bash
# `make test`: installs what is missing, checks formatting and lints, runs
# the native unit and engine tests, builds the Worker, then runs the
# end-to-end suite against wrangler dev (workerd) and the local libSQL server.
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

bash scripts/setup.sh
use_tools_path
# promtool as setup.sh left it, when the system has none of its own.
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
fi

log "native tests (unit, store, engine, http)"
# The /metrics lint must run here, never skip for want of promtool.
MQLITE_REQUIRE_PROMTOOL=1 cargo test --workspace --exclude mqlite-e2e --features mqlite-edge/native

log "building the Worker and the local libSQL server"
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql || die "building mqlite-libsql failed"

log "end-to-end tests through workerd"
MQLITE_E2E_ROOT="$REPO_ROOT" MQLITE_E2E_WRANGLER="$WRANGLER_BIN" \
  MQLITE_E2E_LIBSQL="$REPO_ROOT/target/release/mqlite-libsql" \
  cargo test -p mqlite-e2e
