# The two commands: `make build` and `make test`. Both start from a fresh clone
# with Python 3.11 and the package registries; nothing else is assumed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: build test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

build: $(STAMP)
	$(BIN)/hopperc build samples/*.hk --out-dir build

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/frontend.py
	$(BIN)/python bench/check.py

clean:
	rm -rf build $(VENV)
