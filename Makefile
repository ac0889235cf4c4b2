# Two entry points: `make run` (install + serve) and `make test` (install + every check and test).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
ARTIFACTS ?= test-artifacts

.PHONY: install run test lint browser bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/trace-explorer serve

# Debian's chromium for the browser tests (Playwright's own browser download cannot work offline).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

lint: install
	$(VENV)/bin/ruff check explorer api tests bench
	$(VENV)/bin/mypy

test: install browser lint
	mkdir -p $(ARTIFACTS)
	REQUIRE_BROWSER=1 SCREENSHOT_DIR=$(ARTIFACTS)/screenshots $(VENV)/bin/pytest -q

bench: install
	$(PY) bench/ingest.py
	$(PY) bench/window.py
	$(PY) bench/ui.py

clean:
	rm -rf $(VENV) explorer-data $(ARTIFACTS)
