#!/usr/bin/env bash
# `make test`: installs what is missing, checks formatting and lints, runs
# the native unit and engine tests, builds the Worker, then runs the
# end-to-end suite against wrangler dev (workerd) and the local libSQL server
# (its Durable Object wake hints included, after a `wrangler deploy --dry-run`),
# and drives the admin console in headless Chromium against the same stack.
# Then the fault runs (database SIGKILLed and restarted under load; slow and
# cut answers through a fault proxy), a seeded fuzz of every route, and a
# 20,000-message soak. With SQLD_BIN naming sqld (the libSQL server behind
# Turso; CI sets it when the machine has one) it also runs the end-to-end
# suite and the fault runs against sqld, and the soak against sqld instead
# of the local server.
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/browser.sh"
cd "$REPO_ROOT"

bash scripts/setup.sh
browser_install
use_tools_path

# Formatting, lints (native and wasm) and the native tests: `make check`.
bash scripts/check.sh

log "building the Worker and the local libSQL server"
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql || die "building mqlite-libsql failed"
# The module every cold start loads stays within its budget (docs/bench.md,
# "Module size"; `make bench` reports it with the compile and cold-start times).
module_gz="$(gzip -9c build/index_bg.wasm | wc -c)"
[ "$module_gz" -le 650000 ] \
  || die "build/index_bg.wasm is $module_gz bytes gzipped, over the 650,000-byte budget"
log "the Worker's module: $module_gz bytes gzipped (budget 650,000)"

log "wrangler deploy --dry-run: the Worker, its Durable Object binding and migration validate"
dry_out="$(mktemp -d)"
dry_log="$(MQLITE_SKIP_BUILD=1 WRANGLER_SEND_METRICS=false \
  "$WRANGLER_BIN" deploy --dry-run --outdir "$dry_out" 2>&1)" \
  || die "wrangler deploy --dry-run failed: $dry_log"
rm -rf "$dry_out"
grep -q "MQLITE_WAKER (QueueWaker)" <<<"$dry_log" \
  || die "wrangler deploy --dry-run did not list the QueueWaker binding: $dry_log"

export MQLITE_E2E_ROOT="$REPO_ROOT" MQLITE_E2E_WRANGLER="$WRANGLER_BIN" \
  MQLITE_E2E_LIBSQL="$REPO_ROOT/target/release/mqlite-libsql" \
  MQLITE_E2E_SCHEMATHESIS="$SCHEMATHESIS_VENV/bin/st"

log "end-to-end tests through workerd (local libSQL server)"
cargo test -p mqlite-e2e --test e2e
log "the clients through workerd: mqlite-edge, mqlite-edge-mcp, the consumer under faults, a service binding"
cargo build --quiet -p mqlite-edge-client --bins || die "building the clients failed"
cargo test -p mqlite-e2e --test clients
log "long-poll wake hints through workerd's Durable Objects (seeded; MQLITE_WAKE_SEED replays a run)"
cargo test -p mqlite-e2e --test wake
log "faults through workerd (local libSQL server): SIGKILL and restart, slow and cut answers"
cargo test -p mqlite-e2e --test faults
log "fuzz of every route through workerd (seeded; MQLITE_FUZZ_SEED replays a run)"
cargo test -p mqlite-e2e --test fuzz

log "the admin console in headless Chromium (screenshots in target/ui-test/)"
MQLITE_E2E_PYTHON="$CONSOLE_VENV/bin/python" MQLITE_E2E_CHROMIUM="$CHROMIUM_BIN" \
  MQLITE_E2E_CHROMEDRIVER="$CHROMEDRIVER_BIN" cargo test -p mqlite-e2e --test console

# The pgmq dialect against pgmq's own adapter: installed from PyPI and
# Debian here; if either cannot be installed the run fails (never skips).
source scripts/lib/pgmq.sh
log "differential test against pgmq's reference adapter (pgmq[fastapi]==$PGMQ_VERSION)"
pgmq_install
trap pgmq_stop EXIT
# With auth on (one key), so credentials are compared too.
PGMQ_START_API_KEY=diff-key-0123456789abcdef pgmq_start
MQLITE_E2E_PGMQ_URL="$PGMQ_URL" MQLITE_E2E_PGMQ_KEY=diff-key-0123456789abcdef \
  cargo test -p mqlite-e2e --test pgmq_diff
pgmq_stop
trap - EXIT

log "make dev: secrets only in .dev.vars, nothing left running after SIGTERM"
cargo test -p mqlite-e2e --test dev_script

sqld="$(sqld_bin)"
if [ -n "$sqld" ]; then
  log "end-to-end tests through workerd against sqld ($sqld ${SQLD_FLAGS[*]})"
  MQLITE_E2E_SQLD="$sqld" cargo test -p mqlite-e2e --test e2e
  log "faults through workerd against sqld: SIGKILL and restart, slow and cut answers"
  MQLITE_E2E_SQLD="$sqld" cargo test -p mqlite-e2e --test faults
  log "soak against sqld: 4 producers, 8 consumers, 20,000 messages, group_fifo"
  MQLITE_E2E_SQLD="$sqld" cargo test -p mqlite-e2e --test soak
  log "soak across three sqld databases: the same 20,000 messages over four queues (docs/databases.md)"
  MQLITE_E2E_SQLD="$sqld" MQLITE_SOAK_DATABASES=3 cargo test -p mqlite-e2e --test soak
else
  log "soak against the local libSQL server: 4 producers, 8 consumers, 20,000 messages, group_fifo"
  cargo test -p mqlite-e2e --test soak
  log "soak across three local databases: the same 20,000 messages over four queues (docs/databases.md)"
  MQLITE_SOAK_DATABASES=3 cargo test -p mqlite-e2e --test soak
  log "SKIPPED: the end-to-end and fault runs against sqld (SQLD_BIN is not set;" \
    "point it at sqld, e.g. the one \`turso dev\` runs, to include them)"
fi
