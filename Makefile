# Two entry points: `make run` (install the runtime package + serve) and `make test` (install the dev extra +
# every check and test). They use two virtual environments: the runtime one holds no torch, no CUDA libraries
# and no team-server libraries (the `team` extra), as a user's install would.
VENV ?= .venv
RUN_VENV ?= .venv-run
PY := $(VENV)/bin/python
PYTHON ?= python3
ARTIFACTS ?= test-artifacts
# the PostgreSQL half of the tests: a fresh schema per test in this database (started before every CI run)
PG_TEST_URL ?= postgresql://postgres@127.0.0.1:5432/test
# pytest-xdist workers (a test file stays on one worker, so its module fixtures are made once); 0: one process.
# Measured on the 2-core box: the main half 15:00 -> 11:05, the PostgreSQL half 8:13 -> 4:36 with 2.
TEST_WORKERS ?= 2
# a test skipped for want of node or of ../shared/traces fails instead (tests/conftest.py, REQUIRED_SKIPS), like
# REQUIRE_BROWSER; the shared traces are required where they are (beside the checkout, as on the project's machines)
REQUIRE_NODE ?= 1
REQUIRE_SHARED ?= $(if $(wildcard ../shared/traces),1,)
XDIST = -n $(TEST_WORKERS) --dist loadfile

.PHONY: install install-run run test test-postgres lint browser bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# the C helpers (hatch_build.py compiles them at install; again here when a C file changes)
NATIVE := explorer/ingest/chrome/_kscan.so.1 explorer/ingest/chrome/_gather.so.1 explorer/analysis/_nest.so.1
$(NATIVE) &: explorer/ingest/chrome/_kscan.c explorer/ingest/chrome/_gather.c explorer/analysis/_nest.c $(VENV)/.installed
	$(PY) hatch_build.py

install: $(VENV)/.installed $(NATIVE)

$(RUN_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install -q --upgrade pip
	$(RUN_VENV)/bin/python -m pip install -q -e .
	touch $@

install-run: $(RUN_VENV)/.installed

# TRACE=path/to/trace.json (or a capture folder) to open one: `make run TRACE=trace.json`
run: install-run
	$(RUN_VENV)/bin/trace-explorer serve $(TRACE)

# Debian's chromium for the browser tests (Playwright's own browser download cannot work offline), and node for
# the JavaScript tests.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)
	@command -v node >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null)

lint: install
	$(VENV)/bin/ruff check explorer api tests bench hatch_build.py
	$(VENV)/bin/mypy

test: install browser lint
	mkdir -p $(ARTIFACTS)
	@test -n "$(REQUIRE_SHARED)" || echo "note: ../shared/traces is absent: the tests on the shared real traces skip"
	REQUIRE_BROWSER=1 REQUIRE_NODE=$(REQUIRE_NODE) REQUIRE_SHARED=$(REQUIRE_SHARED) \
		SCREENSHOT_DIR=$(ARTIFACTS)/screenshots $(VENV)/bin/pytest -q $(XDIST) --durations=25
	$(MAKE) --no-print-directory test-postgres

# The suite again with every catalog on PostgreSQL (each data folder its own schema, tests/helpers/catalog_hook.py),
# less what never opens a catalog or only repeats the first half (parsers, an ingest process's memory, fuzzing,
# browser, the truth harness; the queue and team tests make their own databases); fails (does not
# skip) when PostgreSQL is not there. The whole suite on PostgreSQL: EXPLORER_TEST_CATALOG_URL=... pytest.
test-postgres: install
	@$(PY) -c "import psycopg, sys; psycopg.connect(sys.argv[1], connect_timeout=5).close()" '$(PG_TEST_URL)' \
		|| (echo "PostgreSQL at $(PG_TEST_URL) is not answering: the PostgreSQL half of the tests needs it (PG_TEST_URL=... to point elsewhere)"; exit 1)
	EXPLORER_TEST_CATALOG_URL=$(PG_TEST_URL) REQUIRE_NODE=$(REQUIRE_NODE) REQUIRE_SHARED=$(REQUIRE_SHARED) \
		$(VENV)/bin/pytest -q -p no:cacheprovider $(XDIST) --durations=25 \
		--ignore=tests/e2e --ignore=tests/fuzz --ignore=tests/ingest --ignore=tests/native --ignore=tests/team \
		--ignore=tests/runs/jobs \
		--ignore=tests/truth tests

bench: install
	$(PY) bench/ingest.py
	$(PY) bench/window.py
	$(PY) bench/ui.py

clean:
	rm -rf $(VENV) $(RUN_VENV) explorer-data $(ARTIFACTS)
