#!/usr/bin/env bash
# `make mutants ALONE=1 [MODULE=src/filter/check.rs]`: mutation testing of
# src/filter in a crate of its own (docs/testing.md).
#
# The filter language needs nothing of the rest of the crate (std,
# serde_json and regex only), so its files are copied into a scratch crate
# whose library is src/filter/mod.rs, and each mutant rebuilds that small
# crate and runs its unit tests: about 5 s a mutant instead of the ~25 s of
# rebuilding mqlite-edge. What the unit tests miss here may still be caught
# by the engine's tests (tests/conformance_o_test_filter.rs): run the missed
# again in the whole crate, e.g. `RE='<names>' MODULE=src/filter TARGETS="--lib
# --test conformance_o_test_filter" make mutants`.
# Called by scripts/mutants.sh, which has set up PATH and cargo-mutants.
source "$(dirname "$0")/common.sh"
cd "$REPO_ROOT"

for module in ${MODULE:-src/filter}; do
  case "${module%/}" in
    src/filter | src/filter/*) ;;
    *) die "ALONE=1 mutates src/filter only, not $module" ;;
  esac
done

CRATE="${MUTANTS_ALONE_DIR:-$REPO_ROOT/target/mutants-alone}"
rm -rf "$CRATE/src"
mkdir -p "$CRATE/src"
cp -r src/filter "$CRATE/src/filter"
cp Cargo.lock "$CRATE/Cargo.lock"
# The filter's dependencies exactly as the package declares them.
deps=$(awk '/^\[/ { section = $0 } section == "[dependencies]" && /^(serde_json|regex) = /' Cargo.toml)
[ "$(printf '%s\n' "$deps" | wc -l)" -eq 2 ] || die "serde_json and regex not found in Cargo.toml"
cat >"$CRATE/Cargo.toml" <<EOF
# Made by scripts/lib/mutants_alone.sh: src/filter as a crate of its own.
[package]
name = "mqlite-filter-alone"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/filter/mod.rs"

[dependencies]
$deps

[profile.dev]
debug = 0
# The budget tests build tens of MiB of values: unoptimised they take seconds.
opt-level = 1

[workspace]
EOF

scope=()
for module in ${MODULE:-src/filter}; do
  module="${module%/}"
  if [ -d "$module" ]; then
    scope+=(--file "$module/**/*.rs")
  else
    scope+=(--file "$module")
  fi
done
extra=()
[ -n "${SHARD:-}" ] && extra+=(--shard "$SHARD")
[ -n "${RE:-}" ] && extra+=(--re "$RE")
for file in ${SKIP:-}; do extra+=(--exclude "$file"); done
OUT_DIR="$REPO_ROOT/${OUT:-target/mutants}"
mkdir -p "$OUT_DIR"

log "mutants of ${MODULE:-src/filter} in a crate of its own ($CRATE)"
set +e
(cd "$CRATE" && CARGO_TARGET_DIR="$CRATE/target" timeout -s INT -k 60 "${BUDGET:-3600}" \
  cargo mutants --in-place --no-shuffle \
  --exclude 'src/filter/tests.rs' --exclude 'src/filter/reference.rs' --exclude 'src/filter/bench.rs' \
  --timeout "${TIMEOUT:-60}" --build-timeout "${BUILD_TIMEOUT:-600}" \
  --output "$OUT_DIR" "${scope[@]}" "${extra[@]}")
status=$?
set -e
[ "$status" -eq 124 ] && log "stopped at BUDGET=${BUDGET}s: the counts below cover the mutants that ran"
python3 "$REPO_ROOT/scripts/lib/mutants_summary.py" "$OUT_DIR/mutants.out"
case "$status" in 0|2|3|124) exit 0 ;; *) exit "$status" ;; esac
