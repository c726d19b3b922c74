#!/usr/bin/env bash
# `make dev`: installs what is missing, builds, starts a local libSQL server
# (unless LIBSQL_URL points at one), applies migrations and runs the Worker
# under `wrangler dev` on 127.0.0.1 until Ctrl-C.
#
#   PORT           Worker port (default 8787)
#   LIBSQL_PORT    local libSQL server port (default 8080)
#   LIBSQL_URL     use this libSQL server / Turso database instead (+ LIBSQL_AUTH_TOKEN)
#   SQLD_BIN       start this sqld (with the flags in lib/common.sh) instead of the local server
#   MQLITE_TOKENS  admin token(s); generated (mqk_ + 64 hex) when unset
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

PORT="${PORT:-8787}"
LIBSQL_PORT="${LIBSQL_PORT:-8080}"

bash scripts/setup.sh
use_tools_path
log "building the Worker and the local tools"
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql -p mqlite-edge --features mqlite-edge/native \
  || die "native build failed"

pids=()
cleanup() {
  trap - EXIT INT TERM
  log "stopping"
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

if [ -n "${LIBSQL_URL:-}" ]; then
  db_url="$LIBSQL_URL"
  db_token="${LIBSQL_AUTH_TOKEN:-}"
  log "using the libSQL database at $db_url"
else
  mkdir -p data
  db_url="http://127.0.0.1:$LIBSQL_PORT"
  db_token=""
  sqld="$(sqld_bin)"
  if [ -n "$sqld" ]; then
    log "starting sqld ($sqld ${SQLD_FLAGS[*]}) on data/sqld"
    setsid "$sqld" --db-path data/sqld --http-listen-addr "127.0.0.1:$LIBSQL_PORT" --no-welcome \
      "${SQLD_FLAGS[@]}" &
  else
    setsid target/release/mqlite-libsql --db data/mqlite.db --port "$LIBSQL_PORT" &
  fi
  pids+=($!)
  wait_for_http "$db_url/health" 30 || die "the local libSQL server did not start on port $LIBSQL_PORT"
fi

LIBSQL_AUTH_TOKEN="$db_token" target/release/mqlite-edge-migrate --url "$db_url" \
  || die "applying migrations to $db_url failed"

tokens="${MQLITE_TOKENS:-mqk_$(python3 -c 'import secrets; print(secrets.token_hex(32))')}"
vars=(--var "MQLITE_DB:$db_url" --var "MQLITE_TOKENS:$tokens")
[ -n "$db_token" ] && vars+=(--var "MQLITE_DB_AUTH_TOKEN:$db_token")

MQLITE_SKIP_BUILD=1 setsid "$WRANGLER_BIN" dev --local --ip 127.0.0.1 --port "$PORT" "${vars[@]}" \
  --show-interactive-dev-session=false &
pids+=($!)
wait_for_http "http://127.0.0.1:$PORT/healthz" 60 || die "wrangler dev did not start on port $PORT"

cat <<MSG

  mqlite-edge is running
    URL:          http://127.0.0.1:$PORT
    console:      http://127.0.0.1:$PORT/ui  (sign in with the admin token)
    admin token:  ${tokens%%,*}
    database:     $db_url
    API docs:     http://127.0.0.1:$PORT/docs (Swagger UI), /redoc, /openapi.json

  Try:  curl -s http://127.0.0.1:$PORT/ | python3 -m json.tool
  Stop: Ctrl-C

MSG
wait
