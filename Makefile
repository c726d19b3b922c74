# Two commands: `make dev` runs the broker locally, `make test` runs every test.
# Both install whatever is missing first (see scripts/setup.sh).
.PHONY: dev test bench build

dev:
	bash scripts/dev.sh

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh $(ARGS)

build:
	bash scripts/setup.sh && bash scripts/build-worker.sh
