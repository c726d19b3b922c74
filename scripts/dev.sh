#!/usr/bin/env bash
# `make dev`: installs what is missing, builds, starts a local libSQL server
# (unless LIBSQL_URL points at one), applies migrations and runs the Worker
# under `wrangler dev` on 127.0.0.1 until Ctrl-C.
# `make serve` (MQLITE_SERVE=workerd): the same, but the built Worker runs on
# plain workerd (no wrangler: the production runtime, its Durable Objects
# in memory), in SERVE_PROCESSES processes on PORT, PORT+1, … (default 1) that
# share one object per queue (the first hosts them).
#
#   PORT           Worker port (default 8787)
#   LIBSQL_PORT    local libSQL server port (default 8080)
#   LIBSQL_URL     use this libSQL server / Turso database instead (+ LIBSQL_AUTH_TOKEN)
#   LIBSQL_URLS    several databases, comma separated, the catalog first (docs/databases.md)
#   SQLD_SHARDS    start this many local databases (default 1), on LIBSQL_PORT, LIBSQL_PORT+1, …
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

# The databases, the catalog first: named main, db2, db3, … (docs/databases.md).
db_urls=()
db_token="${LIBSQL_AUTH_TOKEN:-}"
if [ -n "${LIBSQL_URLS:-}" ]; then
  IFS=, read -r -a db_urls <<<"$LIBSQL_URLS"
  log "using the libSQL databases at $LIBSQL_URLS"
elif [ -n "${LIBSQL_URL:-}" ]; then
  db_urls=("$LIBSQL_URL")
  log "using the libSQL database at $LIBSQL_URL"
else
  shards="${SQLD_SHARDS:-1}"
  [[ "$shards" =~ ^[1-9][0-9]?$ ]] || die "SQLD_SHARDS must be a number from 1 to 99 (got $shards)"
  mkdir -p data
  db_token=""
  sqld="$(sqld_bin)"
  for i in $(seq 1 "$shards"); do
    port=$((LIBSQL_PORT + i - 1))
    suffix=""
    [ "$i" -gt 1 ] && suffix="-$i"
    db_urls+=("http://127.0.0.1:$port")
    if [ -n "$sqld" ]; then
      log "starting sqld ($sqld ${SQLD_FLAGS[*]}) on data/sqld$suffix"
      setsid "$sqld" --db-path "data/sqld$suffix" --http-listen-addr "127.0.0.1:$port" --no-welcome \
        "${SQLD_FLAGS[@]}" &
    else
      setsid target/release/mqlite-libsql --db "data/mqlite$suffix.db" --port "$port" &
    fi
    pids+=($!)
    wait_for_http "http://127.0.0.1:$port/health" 30 || die "the local libSQL server did not start on port $port"
  done
fi

databases=""
for i in "${!db_urls[@]}"; do
  url="${db_urls[$i]}"
  LIBSQL_AUTH_TOKEN="$db_token" target/release/mqlite-edge-migrate --url "$url" \
    || die "applying migrations to $url failed"
  name=main
  [ "$i" -gt 0 ] && name="db$((i + 1))"
  databases+="${databases:+,}$name=$url"
done
# One database is MQLITE_DB, as ever; several are MQLITE_DATABASES.
db_url="${db_urls[0]}"
db_var=MQLITE_DB
db_value="$db_url"
if [ "${#db_urls[@]}" -gt 1 ]; then
  db_var=MQLITE_DATABASES
  db_value="$databases"
fi

tokens="${MQLITE_TOKENS:-mqk_$(python3 -c 'import secrets; print(secrets.token_hex(32))')}"
runtime="wrangler dev"
if [ "$serve" = workerd ]; then
  runtime="plain workerd, ${SERVE_PROCESSES:-1} process(es) from port $PORT"
  # Secrets in the environment of the launcher only, never on a command line
  # (not even `env`'s, which `ps` shows until it execs): exported by the
  # shell's builtin in a subshell that then becomes the launcher. It writes
  # them into a workerd config only its owner can read.
  (
    export "$db_var=$db_value" MQLITE_TOKENS="$tokens" MQLITE_DB_AUTH_TOKEN="$db_token" \
      MQLITE_SERVE_WORKERD="$workerd_bin" MQLITE_E2E_ROOT="$REPO_ROOT"
    exec setsid target/release/mqlite-serve --port "$PORT" --processes "${SERVE_PROCESSES:-1}"
  ) &
  pids+=($!)
  wait_for_http "http://127.0.0.1:$PORT/healthz" 60 || die "workerd did not start on port $PORT"
else
  # Created empty with mode 0600 before any secret is written into it.
  ( umask 077 && : > "$DEV_VARS" )
  chmod 600 "$DEV_VARS"
  {
    printf '%s\n' "$DEV_VARS_MARK"
    printf '%s="%s"\n' "$db_var" "$db_value"
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
    database:     ${db_value//,/, }
    API docs:     http://127.0.0.1:$PORT/docs (Swagger UI), /redoc, /openapi.json

  Try:  curl -s http://127.0.0.1:$PORT/ | python3 -m json.tool
  Stop: Ctrl-C

MSG
wait
