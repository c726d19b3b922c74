#!/usr/bin/env bash
# `make mutants`: mutation testing with cargo-mutants over the native suite
# (docs/testing.md). Each mutant is one small semantic change to the code
# (a condition negated, a value replaced, a call removed); a mutant the tests
# still pass on ("missed") marks behaviour no test pins.
#
# Scope, by default what changed since main (`git diff main`, committed or
# not); MODULE names a file or a folder instead:
#   make mutants                                  # the diff against main
#   make mutants MODULE=src/store/health.rs       # one file
#   make mutants MODULE=src/engine/pgmq           # a folder
#   make mutants MODULE="src/http/docs.rs src/filter"  # several, in one run
# Knobs (environment or make variables):
#   BASE=main        what the diff is taken against
#   TIMEOUT=120      seconds one mutant's tests may run (then: timeout)
#   BUILD_TIMEOUT=600  seconds one mutant's build may take
#   BUDGET=3600      seconds for the whole run; cut there, what ran is kept
#   JOBS=1           mutants built and tested at once (each needs a build dir)
#   IN_PLACE=1       mutate the working tree itself instead of a copy: no copy
#                    of target/ and no baseline rebuild (minutes saved per run);
#                    leave the tree alone until it ends (JOBS must be 1);
#                    builds go to MUTANTS_TARGET (target/mutants-build), no
#                    debug info, linked by mold if installed
#   SHARD=k/n        only the k-th of n slices of the mutants
#   RE=regex         only the mutants whose name matches (e.g. a run's survivors)
#   SKIP="a.rs b.rs" files left out of the scope (e.g. ones run on their own)
#   TESTS="--lib --test pgmq_dialect"  what nextest runs (all targets are still built)
#   TARGETS="--lib --test group_commit"  what is built and run: only these
#                    targets (each mutant then links a few test binaries, not all)
#   OUT=target/mutants  where mutants.out (outcomes, logs) goes
#   ALONE=1          src/filter only: mutate it in a crate of its own (it needs
#                    std, serde_json and regex alone) against its unit tests,
#                    ~5 s a mutant instead of ~25 (scripts/lib/mutants_alone.sh)
# Not part of `make test` or `make check`: a pass over a large module takes
# an hour on two cores.
source "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"
use_tools_path

CARGO_MUTANTS_VERSION="27.1.0"
MUTANTS_ROOT="$TOOLS_DIR/cargo-mutants"
if ! "$MUTANTS_ROOT/bin/cargo-mutants" mutants --version 2>/dev/null | grep -q "$CARGO_MUTANTS_VERSION"; then
  log "cargo install cargo-mutants@$CARGO_MUTANTS_VERSION into $MUTANTS_ROOT (one-off, a few minutes)"
  # A build folder of its own, so an interrupted install resumes.
  CARGO_TARGET_DIR="$MUTANTS_ROOT/build" \
    cargo install --locked --root "$MUTANTS_ROOT" "cargo-mutants@$CARGO_MUTANTS_VERSION" >/dev/null \
    || die "cargo install cargo-mutants@$CARGO_MUTANTS_VERSION failed"
fi
export PATH="$MUTANTS_ROOT/bin:$PATH"
command -v cargo-nextest >/dev/null || die "cargo-nextest is not installed (cargo install cargo-nextest --locked)"

BASE="${BASE:-main}"
TIMEOUT="${TIMEOUT:-120}"
BUILD_TIMEOUT="${BUILD_TIMEOUT:-600}"
BUDGET="${BUDGET:-3600}"
JOBS="${JOBS:-1}"
OUT="${OUT:-target/mutants}"
mkdir -p "$OUT"

scope=()
if [ -n "${MODULE:-}" ]; then
  for module in $MODULE; do
    module="${module%/}"
    if [ -d "$module" ]; then
      scope+=(--file "$module/**/*.rs")
    elif [ -f "$module" ]; then
      scope+=(--file "$module")
    else
      die "MODULE=$module is neither a file nor a folder"
    fi
  done
  log "mutants of $MODULE"
else
  git diff "$BASE" -- . >"$OUT/diff" || die "cannot diff against $BASE"
  if [ ! -s "$OUT/diff" ]; then
    log "nothing changed since $BASE: no mutants to test (MODULE=... names one)"
    exit 0
  fi
  scope=(--in-diff "$OUT/diff")
  log "mutants in what changed since $BASE"
fi

shard=()
[ -n "${SHARD:-}" ] && shard=(--shard "$SHARD")
if [ "${ALONE:-}" = 1 ]; then
  exec bash "$REPO_ROOT/scripts/lib/mutants_alone.sh"
fi
[ -n "${RE:-}" ] && shard+=(--re "$RE")
for file in ${SKIP:-}; do shard+=(--exclude "$file"); done
# Cargo arguments of both the build and the test phase, one --cargo-arg each.
targets=()
for arg in ${TARGETS:-}; do targets+=("--cargo-arg=$arg"); done

# The native suite of the mqlite-edge package only: the e2e crate needs a
# built Worker, and the wasm shell never compiles natively. Each mutant is
# built in a copy of the tree, target/ included, so only this crate rebuilds.
where=(--copy-target=true -j "$JOBS")
if [ "${IN_PLACE:-}" = 1 ]; then
  where=(--in-place)
  # In place, mutants build in a target folder of their own (a run never
  # invalidates the normal build, nor it the run's), without debug info and
  # linked by mold when it is installed: linking the test binaries is most
  # of a mutant's build.
  export CARGO_TARGET_DIR="${MUTANTS_TARGET:-$REPO_ROOT/target/mutants-build}"
  export CARGO_PROFILE_DEV_DEBUG=0
  if command -v mold >/dev/null; then
    export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C link-arg=-fuse-ld=mold"
  fi
fi
set +e
timeout -s INT -k 60 "$BUDGET" cargo mutants \
  --package mqlite-edge --features native \
  --exclude 'e2e/**' --exclude 'src/worker_shell.rs' --exclude 'src/worker_shell/**' \
  "${where[@]}" --test-tool nextest \
  --timeout "$TIMEOUT" --build-timeout "$BUILD_TIMEOUT" \
  --output "$OUT" --no-shuffle \
  "${scope[@]}" "${shard[@]}" "${targets[@]}" \
  -- ${TESTS:-}
status=$?
set -e
[ "$status" -eq 124 ] && log "stopped at BUDGET=${BUDGET}s: the counts below cover the mutants that ran"
python3 "$REPO_ROOT/scripts/lib/mutants_summary.py" "$OUT/mutants.out"
# cargo-mutants exits 2 when mutants were missed, 3 on timeouts: reported
# above, not a failure of this script.
case "$status" in 0|2|3|124) exit 0 ;; *) exit "$status" ;; esac
