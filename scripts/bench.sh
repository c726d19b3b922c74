#!/usr/bin/env bash
# `make bench`: builds everything and prints, per RPC, what it costs the
# database (mqlite-dbcost: statements, rows read and written, execution time,
# from sqld's own answers), latency through wrangler dev (mqlite-bench), and
# peak memory of a large Send and Worker CPU under wrangler dev and plain
# workerd, plus throughput side by side
# with pgmq's reference HTTP adapter (mqlite-sidebyside; it installs Debian's
# PostgreSQL and pgmq[fastapi] from PyPI when they are missing).
# Then long-poll wake-up with and without the Durable Object wake hints
# (mqlite-wake), the Worker module's size and cold start (mqlite-module), and
# what one call to a Durable Object costs workerd (scripts/object-call-probe.py).
# Extra arguments go to mqlite-bench, e.g. `make bench ARGS="--iterations 500"`;
# SIDEBYSIDE_ARGS to mqlite-sidebyside, e.g. "--seconds 10 --requests 100".
# With SQLD_BIN naming sqld, everything runs against sqld; without it, what
# needs sqld says SKIPPED and mqlite-bench uses the local server.
# Each step is bounded by BENCH_STEP_TIMEOUT seconds (default 1200).
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/pgmq.sh"
cd "$REPO_ROOT"
bash scripts/setup.sh
use_tools_path
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql -p mqlite-bench || die "build failed"
step_timeout="${BENCH_STEP_TIMEOUT:-1200}"

# Runs one benchmark binary within the step bound.
bounded() {
  local status=0
  timeout --kill-after=10 "$step_timeout" "$@" || status=$?
  [ "$status" = 124 ] && die "$1 did not finish within $step_timeout s (BENCH_STEP_TIMEOUT)"
  [ "$status" = 0 ] || die "$1 failed (exit $status)"
}

sqld="$(sqld_bin)"
if [ -n "$sqld" ]; then
  log "benchmarking against sqld ($sqld ${SQLD_FLAGS[*]})"
else
  log "benchmarking against the local libSQL server (set SQLD_BIN to use sqld)"
fi
export MQLITE_E2E_ROOT="$REPO_ROOT" MQLITE_E2E_WRANGLER="$WRANGLER_BIN" \
  MQLITE_E2E_LIBSQL="$REPO_ROOT/target/release/mqlite-libsql" MQLITE_E2E_SQLD="$sqld"
if [ -n "$sqld" ]; then
  SQLD_BIN="$sqld" bounded target/release/mqlite-dbcost
  # sqld's CPU per fresh or reused stream, preparing against running the Send statement,
  # a skipped step's parse, and what the schema costs every request.
  SQLD_BIN="$sqld" bounded python3 scripts/sqld-costs-probe.py 400
else
  log "SKIPPED database cost per RPC: it needs sqld's own figures (set SQLD_BIN, e.g. to the sqld that \`turso dev\` runs)"
fi
bounded target/release/mqlite-bench "$@"
# Long-poll wake-up with and without the QueueWaker binding; WAKE_ARGS e.g.
# "--waits 32 --sends 200".
# shellcheck disable=SC2086 # WAKE_ARGS is a list of flags
bounded target/release/mqlite-wake ${WAKE_ARGS:-}

workerd_bin="$(find "$NPM_DIR/node_modules/@cloudflare" -path '*/workerd-linux-*/bin/workerd' -type f 2>/dev/null | head -n 1)"
[ -x "$workerd_bin" ] || die "no workerd binary under $NPM_DIR/node_modules/@cloudflare (wrangler's npm package ships it: rerun scripts/setup.sh)"
log "the Worker's module: its size, its compilation, a fresh workerd's first answer"
MQLITE_BENCH_WORKERD="$workerd_bin" bounded target/release/mqlite-module
# What one call to a Durable Object costs workerd by itself: fetch against RPC.
MQLITE_BENCH_WORKERD="$workerd_bin" bounded python3 scripts/object-call-probe.py

if [ -z "$sqld" ]; then
  log "SKIPPED Worker CPU per RPC and throughput against pgmq's adapter: they run mqlite-edge on sqld (set SQLD_BIN)"
  exit 0
fi
pgmq_install
trap pgmq_stop EXIT
pgmq_start
# shellcheck disable=SC2086 # SIDEBYSIDE_ARGS is a list of flags
SQLD_BIN="$sqld" MQLITE_BENCH_WORKERD="$workerd_bin" PGMQ_URL="$PGMQ_URL" PGMQ_PIDS="$PGMQ_PIDS" \
  bounded target/release/mqlite-sidebyside ${SIDEBYSIDE_ARGS:-}
