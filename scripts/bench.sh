#!/usr/bin/env bash
# `make bench`: builds everything and prints, per RPC, what it costs the
# database (mqlite-dbcost: statements, rows read and written, execution time,
# from sqld's own answers) and latency through workerd (mqlite-bench).
# Extra arguments go to mqlite-bench, e.g. `make bench ARGS="--iterations 500"`.
# With SQLD_BIN naming sqld, both run against sqld instead of the local server.
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
if [ -n "$sqld" ]; then
  SQLD_BIN="$sqld" target/release/mqlite-dbcost
else
  log "SKIPPED database cost per RPC: it needs sqld's own figures (set SQLD_BIN, e.g. to the sqld that \`turso dev\` runs)"
fi
MQLITE_E2E_ROOT="$REPO_ROOT" MQLITE_E2E_WRANGLER="$WRANGLER_BIN" \
  MQLITE_E2E_LIBSQL="$REPO_ROOT/target/release/mqlite-libsql" MQLITE_E2E_SQLD="$sqld" \
  target/release/mqlite-bench "$@"
