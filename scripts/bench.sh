#!/usr/bin/env bash
# `make bench`: builds everything and prints latency numbers (see bench/).
# Extra arguments go to mqlite-bench, e.g. `make bench ARGS="--iterations 500"`.
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"
bash scripts/setup.sh
use_tools_path
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql -p mqlite-bench || die "build failed"
MQLITE_E2E_ROOT="$REPO_ROOT" MQLITE_E2E_WRANGLER="$WRANGLER_BIN" \
  MQLITE_E2E_LIBSQL="$REPO_ROOT/target/release/mqlite-libsql" \
  target/release/mqlite-bench "$@"
