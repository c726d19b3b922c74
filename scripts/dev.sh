#!/usr/bin/env bash
# `make dev`: installs what is missing, builds, starts a local libSQL server
# (unless LIBSQL_URL points at one), applies migrations and runs the Worker
# under `wrangler dev` on 127.0.0.1 until Ctrl-C.
# `make serve` (MQLITE_SERVE=workerd): the same, but the built Worker runs on
# plain workerd (no wrangler: the production runtime, its Durable Objects
# in memory), in SERVE_PROCESSES processes on PORT, PORT+1, … (default 1).
#
#   PORT           Worker port (default 8787)
#   LIBSQL_PORT    local libSQL server port (default 8080)
#   LIBSQL_URL     use this libSQL server / Turso database instead (+ LIBSQL_AUTH_TOKEN)
#   SQLD_BIN       start this sqld (with the flags in lib/common.sh) instead of the local server
#   INSPECTOR_PORT wrangler's inspector port (default 9229)
#   MQLITE_TOKENS  admin token(s); generated (mqk_ + 64 hex) when unset
#
# Secrets reach wrangler through .dev.vars (mode 0600, gitignored, removed on
# exit), never on a command line, where any local user could read them in
# /proc/*/cmdline. Ctrl-C or SIGTERM stops every process this script started,
# their children included.
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

PORT="${PORT:-8787}"
LIBSQL_PORT="${LIBSQL_PORT:-8080}"
INSPECTOR_PORT="${INSPECTOR_PORT:-9229}"
DEV_VARS="$REPO_ROOT/.dev.vars"
DEV_VARS_MARK="# written by scripts/dev.sh: removed when it stops"
if [ -e "$DEV_VARS" ] && [ "$(head -n 1 "$DEV_VARS")" != "$DEV_VARS_MARK" ]; then
  die "$DEV_VARS exists and was not written by make dev: move it away first"
fi

bash scripts/setup.sh
use_tools_path
log "building the Worker and the local tools"
bash scripts/build-worker.sh
cargo build --release --quiet -p mqlite-libsql -p mqlite-edge --features mqlite-edge/native \
  || die "native build failed"
serve="${MQLITE_SERVE:-}"
if [ "$serve" = workerd ]; then
  cargo build --release --quiet -p mqlite-bench --bin mqlite-serve || die "building mqlite-serve failed"
  workerd_bin="$(find "$NPM_DIR/node_modules/@cloudflare" -path '*/workerd-linux-*/bin/workerd' -type f 2>/dev/null | head -n 1)"
  [ -x "$workerd_bin" ] || die "no workerd binary under $NPM_DIR/node_modules/@cloudflare (rerun scripts/setup.sh)"
fi

pids=()
# Every process below this shell, from the parent links in /proc (wrangler's
# workerd and esbuild included, whatever process group they chose).
descendants() {
  local -A children=()
  local stat line pid
  local -a fields
  for stat in /proc/[0-9]*/stat; do
    line="$(cat "$stat" 2>/dev/null)" || continue
    pid="${line%% *}"
    read -r -a fields <<<"${line##*) }"
    children[${fields[1]}]+=" $pid"
  done
  local -a frontier=("$$")
  while [ "${#frontier[@]}" -gt 0 ]; do
    local parent="${frontier[0]}" child
    frontier=("${frontier[@]:1}")
    for child in ${children[$parent]:-}; do
      printf '%s\n' "$child"
      frontier+=("$child")
    done
  done
}
# Running, as opposed to gone or a zombie waiting to be reaped.
alive() {
  local state
  state="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  state="${state##*) }"
  [ "${state:0:1}" != Z ]
}
cleanup() {
  trap - EXIT INT TERM
  log "stopping"
  local -a all
  mapfile -t all < <(descendants)
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  for pid in "${all[@]}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  local i
  for i in $(seq 50); do
    local alive=0
    for pid in "${all[@]}"; do [ -n "$pid" ] && alive "$pid" && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  for pid in "${all[@]}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -e "$DEV_VARS" ] && [ "$(head -n 1 "$DEV_VARS")" = "$DEV_VARS_MARK" ]; then
    rm -f "$DEV_VARS"
  fi
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
runtime="wrangler dev"
if [ "$serve" = workerd ]; then
  runtime="plain workerd, ${SERVE_PROCESSES:-1} process(es) from port $PORT"
  # Secrets in the environment of the launcher only (never a command line);
  # it writes them into a workerd config only its owner can read.
  MQLITE_DB="$db_url" MQLITE_TOKENS="$tokens" MQLITE_DB_AUTH_TOKEN="$db_token" \
    MQLITE_SERVE_WORKERD="$workerd_bin" MQLITE_E2E_ROOT="$REPO_ROOT" \
    setsid target/release/mqlite-serve --port "$PORT" --processes "${SERVE_PROCESSES:-1}" &
  pids+=($!)
  wait_for_http "http://127.0.0.1:$PORT/healthz" 60 || die "workerd did not start on port $PORT"
else
  # Created empty with mode 0600 before any secret is written into it.
  ( umask 077 && : > "$DEV_VARS" )
  chmod 600 "$DEV_VARS"
  {
    printf '%s\n' "$DEV_VARS_MARK"
    printf 'MQLITE_DB="%s"\n' "$db_url"
    printf 'MQLITE_TOKENS="%s"\n' "$tokens"
    [ -n "$db_token" ] && printf 'MQLITE_DB_AUTH_TOKEN="%s"\n' "$db_token"
    [ -n "${MQLITE_MONITOR_TOKENS:-}" ] && printf 'MQLITE_MONITOR_TOKENS="%s"\n' "$MQLITE_MONITOR_TOKENS"
    true
  } >> "$DEV_VARS"

  MQLITE_SKIP_BUILD=1 setsid "$WRANGLER_BIN" dev --local --ip 127.0.0.1 --port "$PORT" \
    --inspector-port "$INSPECTOR_PORT" --show-interactive-dev-session=false &
  pids+=($!)
  wait_for_http "http://127.0.0.1:$PORT/healthz" 60 || die "wrangler dev did not start on port $PORT"
fi

cat <<MSG

  mqlite-edge is running ($runtime)
    URL:          http://127.0.0.1:$PORT
    console:      http://127.0.0.1:$PORT/ui  (sign in with the admin token)
    admin token:  ${tokens%%,*}
    database:     $db_url
    API docs:     http://127.0.0.1:$PORT/docs (Swagger UI), /redoc, /openapi.json

  Try:  curl -s http://127.0.0.1:$PORT/ | python3 -m json.tool
  Stop: Ctrl-C

MSG
wait
