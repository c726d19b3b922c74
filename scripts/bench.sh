#!/usr/bin/env bash
# `make bench`: builds everything and prints latency numbers (see bench/).
# Extra arguments go to mqlite-bench, e.g. `make bench ARGS="--iterations 500"`.
# With SQLD_BIN naming sqld, the bench runs against sqld instead of the local server.
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"
bash scripts/setup.sh
use_tools_path
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql -p mqlite-bench || die "build failed"
sqld="$(sqld_bin)"
if [ -n "$sqld" ]; then
  log "benchmarking against sqld ($sqld ${SQLD_FLAGS[*]})"
else
  log "benchmarking against the local libSQL server (set SQLD_BIN to use sqld)"
fi
MQLITE_E2E_ROOT="$REPO_ROOT" MQLITE_E2E_WRANGLER="$WRANGLER_BIN" \
  MQLITE_E2E_LIBSQL="$REPO_ROOT/target/release/mqlite-libsql" MQLITE_E2E_SQLD="$sqld" \
  target/release/mqlite-bench "$@"
