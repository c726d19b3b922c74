# Two commands: `make dev` runs the broker locally, `make test` runs every test.
# `make serve` runs it on plain workerd, the production runtime.
# Both install whatever is missing first (see scripts/setup.sh). `make check` is
# the fast loop: formatting, lints (native and wasm) and the native tests.
.PHONY: dev serve test check bench build mutants

dev:
	bash scripts/dev.sh

# The built Worker on plain workerd (no wrangler), as in production;
# SERVE_PROCESSES=N runs N workerd processes on PORT, PORT+1, ...
serve:
	MQLITE_SERVE=workerd bash scripts/dev.sh

test:
	bash scripts/test.sh

check:
	bash scripts/check.sh

bench:
	bash scripts/bench.sh $(ARGS)

build:
	bash scripts/setup.sh && bash scripts/build-worker.sh

# Mutation testing (docs/testing.md): what changed since main, or MODULE=src/...
mutants:
	bash scripts/mutants.sh
