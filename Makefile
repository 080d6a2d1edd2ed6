# Shortcuts for developers; the README's commands work without make.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test lint fix serve

$(BIN)/cari: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -e '.[test]'
	touch $@

install: $(BIN)/cari

test: install
	PATH="$(CURDIR)/$(BIN):$$PATH" scripts/test

lint: install
	PATH="$(CURDIR)/$(BIN):$$PATH" scripts/lint

fix: install
	$(BIN)/python scripts/sync_client.py
	$(BIN)/ruff check --fix service tests alembic bench
	$(BIN)/ruff format service tests alembic bench

serve: install
	$(BIN)/cari serve
