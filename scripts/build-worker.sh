#!/usr/bin/env bash
# Builds the Worker (wasm + JS shim) into build/ with worker-build, offline.
# MQLITE_SKIP_BUILD=1 reuses an existing build (wrangler dev in tests).
source "$(dirname "$0")/lib/common.sh"
use_tools_path
cd "$REPO_ROOT"

# Static assets (wrangler.toml [assets]): Swagger UI and ReDoc for /docs and
# /redoc, served by the platform from this Worker's origin. Copied only when
# they differ, and by rename, so concurrent `wrangler dev` starts never see a
# half-written file.
vendor_asset() { # source destination
  local src="$1" dst="build/assets/$2"
  [ -f "$src" ] || die "$src is missing: run scripts/setup.sh (or make dev / make test)"
  cmp -s "$src" "$dst" 2>/dev/null && return 0
  mkdir -p "$(dirname "$dst")"
  cp "$src" "$dst.tmp.$$" && mv -f "$dst.tmp.$$" "$dst"
}
ui="$DOCS_UI_DIR/node_modules"
vendor_asset "$ui/swagger-ui-dist/swagger-ui-bundle.js" docs/swagger-ui/swagger-ui-bundle.js
vendor_asset "$ui/swagger-ui-dist/swagger-ui.css" docs/swagger-ui/swagger-ui.css
vendor_asset "$ui/swagger-ui-dist/LICENSE" docs/swagger-ui/LICENSE
vendor_asset "$ui/redoc/bundles/redoc.standalone.js" redoc/redoc.standalone.js
vendor_asset "$ui/redoc/LICENSE" redoc/LICENSE

# The console's files, which the Worker serves from the ASSETS binding.
for file in index.html console.js console.css; do
  vendor_asset "console/$file" "ui/$file"
done

if [ "${MQLITE_SKIP_BUILD:-}" = 1 ] && [ -f build/worker/shim.mjs ]; then exit 0; fi
# worker-build always re-runs wasm-bindgen and wasm-opt: skip it when nothing
# that goes into the Worker changed since the last build.
if [ -f build/worker/shim.mjs ] && [ -f build/index_bg.wasm ] \
   && [ -f build/assets/openapi.json ] \
   && [ -z "$(find src console migrations openapi build.rs Cargo.toml Cargo.lock .cargo scripts/build-worker.sh -newer build/index_bg.wasm -print -quit)" ]; then
  log "Worker build is up to date"
  exit 0
fi

mode="$(cat "$WASM_TOOLCHAIN_DIR/mode" 2>/dev/null || true)"
[ -n "$mode" ] || die "toolchain not set up: run scripts/setup.sh (or make dev / make test)"
if [ "$mode" = debian ]; then
  export PATH="$WASM_TOOLCHAIN_DIR/bin:$PATH"
  export RUSTC_BOOTSTRAP=1
  export CARGO_UNSTABLE_BUILD_STD="std,panic_abort"
fi
export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
export ESBUILD_BIN="$NPM_DIR/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$NPM_DIR/node_modules/binaryen/bin/wasm-opt"
# A target dir of its own: the wasm toolchain differs from the native one.
export CARGO_TARGET_DIR="$REPO_ROOT/target/wasm"
worker-build --release >&2 || die "worker-build failed"
# Workers RPC reaches a Durable Object's methods only when its class extends
# DurableObject, and worker-build exports QueueWaker as a plain class: the
# Worker calls the object's `commit` method that way, at about half the
# CPU of a fetch (src/worker_shell/waker.rs, docs/bench.md). The module
# imports itself to reach its own export, whatever name esbuild gave it.
grep -q ' as QueueWaker\b' build/index.js || die "build/index.js exports no QueueWaker"
cat >> build/index.js <<'JS'
import { DurableObject as MqliteDurableObject } from "cloudflare:workers";
import { QueueWaker as MqliteQueueWaker } from "./index.js";
Object.setPrototypeOf(MqliteQueueWaker.prototype, MqliteDurableObject.prototype);
Object.setPrototypeOf(MqliteQueueWaker, MqliteDurableObject);
JS
# worker-build keeps the name section (function names: a tenth of the gzipped
# module, parsed by every cold start). Dropped here; a panic's stack trace
# then shows wasm-function[N] instead of names (docs/deviations.md).
# The feature set worker-build gives wasm-opt, so nothing is re-encoded.
features=()
for feature in mutable-globals sign-ext nontrapping-float-to-int bulk-memory \
  multivalue reference-types exception-handling; do
  features+=("--enable-$feature")
done
"$WASM_OPT_BIN" --strip-debug --strip-producers "${features[@]}" \
  build/index_bg.wasm -o build/index_bg.wasm.stripped \
  && mv -f build/index_bg.wasm.stripped build/index_bg.wasm \
  || die "wasm-opt --strip-debug failed"
# The merged OpenAPI document build.rs wrote for this build (the newest of
# the build script's outputs), which the Worker serves from ASSETS.
openapi="$(ls -t "$CARGO_TARGET_DIR"/wasm32-unknown-unknown/release/build/mqlite-edge-*/out/openapi.json 2>/dev/null | head -n 1)"
[ -n "$openapi" ] || die "build.rs wrote no openapi.json under $CARGO_TARGET_DIR"
vendor_asset "$openapi" openapi.json
