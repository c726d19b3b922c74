# pgmq's reference HTTP adapter (PyPI `pgmq[fastapi]`, module `pgmq.api`) on
# Debian's PostgreSQL, for the side-by-side throughput of `make bench`.
# Sourced after common.sh. pgmq_install is idempotent; pgmq_start runs a
# throw-away cluster plus the adapter and sets PGMQ_URL; pgmq_stop undoes it.

PGMQ_VERSION="1.1.4"
PGMQ_VENV="$TOOLS_DIR/pgmq-venv"

# The newest installed PostgreSQL's bin directory (Debian layout), or nothing.
pg_bindir() {
  find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1
}

# As root, through sudo otherwise (a newcomer's machine).
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

pgmq_install() {
  if [ -z "$(pg_bindir)" ]; then
    log "installing PostgreSQL (Debian's postgresql package)"
    as_root apt-get update -qq >&2 \
      && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2 \
      || die "cannot install PostgreSQL: apt-get install postgresql failed"
    [ -n "$(pg_bindir)" ] || die "PostgreSQL installed but no /usr/lib/postgresql/*/bin found"
  fi
  if ! "$PGMQ_VENV/bin/python" - "$PGMQ_VERSION" 2>/dev/null <<'EOF'
import sys, importlib.metadata as m, fastapi, uvicorn, pgmq.api
sys.exit(m.version("pgmq") != sys.argv[1])
EOF
  then
    log "installing pgmq[fastapi]==$PGMQ_VERSION from PyPI into $PGMQ_VENV"
    python3 -m venv "$PGMQ_VENV" \
      && "$PGMQ_VENV/bin/pip" install -q "pgmq[fastapi]==$PGMQ_VERSION" >&2 \
      || die "cannot install pgmq[fastapi]==$PGMQ_VERSION from PyPI"
  fi
}

# Starts PostgreSQL in a temporary directory (as the postgres user when run
# as root: PostgreSQL refuses root), installs pgmq's SQL, serves the adapter
# (auth off, or on with the one key PGMQ_START_API_KEY when that is set; its
# defaults otherwise) and sets PGMQ_URL and PGMQ_PIDS.
pgmq_start() {
  local bin pg_port api_port dsn as=()
  bin="$(pg_bindir)"
  pg_port="$(free_port)"
  api_port="$(free_port)"
  PGMQ_DIR="$(mktemp -d /tmp/mqlite-pgmq.XXXXXX)"
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$PGMQ_DIR"
    as=(runuser -u postgres --)
  fi
  PGMQ_AS=("${as[@]}")
  "${as[@]}" "$bin/initdb" -D "$PGMQ_DIR/data" -U postgres --auth=trust >"$PGMQ_DIR/initdb.log" 2>&1 \
    || die "initdb failed: $(tail -n 5 "$PGMQ_DIR/initdb.log")"
  "${as[@]}" "$bin/pg_ctl" -D "$PGMQ_DIR/data" -l "$PGMQ_DIR/postgres.log" -w -t 60 \
    -o "-p $pg_port -k $PGMQ_DIR -c listen_addresses=127.0.0.1" start >/dev/null \
    || die "PostgreSQL did not start: $(tail -n 5 "$PGMQ_DIR/postgres.log")"
  PGMQ_PG_CTL="$bin/pg_ctl"
  dsn="postgresql://postgres@127.0.0.1:$pg_port/postgres"
  "$PGMQ_VENV/bin/python" -c 'import sys; from pgmq.install import install_pgmq_from_sql as i; i(dsn=sys.argv[1])' "$dsn" >&2 \
    || die "installing pgmq's SQL failed"
  local auth_mode=none
  [ -z "${PGMQ_START_API_KEY:-}" ] || auth_mode=keys
  DATABASE_URL="$dsn" PG_INIT_EXTENSION=false \
    PGMQ_API_AUTH_MODE="$auth_mode" PGMQ_API_KEY="${PGMQ_START_API_KEY:-}" \
    "$PGMQ_VENV/bin/python" -m pgmq.api --host 127.0.0.1 --port "$api_port" --log-level warning \
    >"$PGMQ_DIR/api.log" 2>&1 &
  PGMQ_API_PID=$!
  PGMQ_URL="http://127.0.0.1:$api_port"
  # The adapter's and the postmaster's process ids (its backends are children).
  PGMQ_PIDS="$PGMQ_API_PID $(head -n 1 "$PGMQ_DIR/data/postmaster.pid")"
  wait_for_http "$PGMQ_URL/health" 60 || die "pgmq's adapter did not answer: $(tail -n 20 "$PGMQ_DIR/api.log")"
  log "pgmq $PGMQ_VERSION adapter on $PGMQ_URL (PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on port $pg_port)"
}

pgmq_stop() {
  [ -n "${PGMQ_DIR:-}" ] || return 0
  if [ -n "${PGMQ_API_PID:-}" ]; then
    kill "$PGMQ_API_PID" 2>/dev/null || true
    wait "$PGMQ_API_PID" 2>/dev/null || true
  fi
  if [ -n "${PGMQ_PG_CTL:-}" ]; then
    "${PGMQ_AS[@]}" "$PGMQ_PG_CTL" -D "$PGMQ_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PGMQ_DIR"
  PGMQ_DIR=""
}
