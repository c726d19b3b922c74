#!/usr/bin/env bash
# `make test`: installs what is missing, checks formatting and lints, runs
# the native unit and engine tests, builds the Worker, then runs the
# end-to-end suite against wrangler dev (workerd) and the local libSQL server.
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

bash scripts/setup.sh
use_tools_path

log "format and lint"
cargo fmt --all -- --check || die "cargo fmt found unformatted code: run cargo fmt --all"
cargo clippy --quiet --workspace --all-targets --features mqlite-edge/native -- -D warnings \
  || die "clippy found warnings"

log "native tests (unit, store, engine, http)"
cargo test --workspace --exclude mqlite-e2e --features mqlite-edge/native

log "building the Worker and the local libSQL server"
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql || die "building mqlite-libsql failed"

log "end-to-end tests through workerd"
MQLITE_E2E_ROOT="$REPO_ROOT" MQLITE_E2E_WRANGLER="$WRANGLER_BIN" \
  MQLITE_E2E_LIBSQL="$REPO_ROOT/target/release/mqlite-libsql" \
  cargo test -p mqlite-e2e
