# offeval — two commands: `make run` (dashboard on the demo data, or LOGS=FILE) and `make test` (everything).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: run test test-fast setup browser lint data docs-numbers bench clean mutate

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

# Debian's chromium for browser tests and static chart export (kaleido finds /usr/bin/chromium).
browser:
	@test -x /usr/bin/chromium || { \
	  echo "installing Debian's chromium (browser tests, PNG/SVG export)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# make run LOGS=my.csv MAP='session_id=visit,rank=pos,rank__*=pos_*' serves your own logs (default: the demo)
LOGS ?=
MAP ?=
HOST ?= 127.0.0.1
run: setup
	$(BIN)/python -m offeval_core.cli dashboard $(LOGS) $(if $(MAP),--map '$(MAP)') --port $(PORT) --host $(HOST)

lint: setup
	$(BIN)/ruff check .

# the suite runs on two shared cores: Hypothesis's ci profile (tests/conftest.py) there, unless one is chosen;
# under load the dev profile's too-slow health check failed a property whose strategy is not slow alone
export HYPOTHESIS_PROFILE ?= ci

test: setup browser lint
	$(BIN)/python -m pytest -q -p no:cacheprovider --doctest-modules offeval_core dashboard/state.py dashboard/render.py dashboard/pages.py dashboard/data
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

# the inner loop: no slow, browser or Spark tests (make test still runs everything)
test-fast: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q -p no:cacheprovider -m "not slow and not browser and not spark"

# the demo, and its default moments in the moments cache (~/.cache/offeval/moments): a new server's first chart
# reads them instead of computing them
data: setup
	$(BIN)/offeval simulate --out data --preset demo --seed 0 --force
	$(BIN)/python -m dashboard.prefill data

# every number README.md and docs/ quote from the demo, rewritten from data/ (SEEDS=1,2,3,4,5 adds the per-seed
# table of data/README.md, minutes); tests/test_docs_numbers.py checks them
SEEDS ?=
docs-numbers: setup
	$(BIN)/python tools/docs_numbers.py $(if $(SEEDS),--seeds $(SEEDS))

# LARGE=1 adds 100 M impressions out of core (minutes); bench/bench_estimate.py compares pandas and Spark
bench: setup browser
	$(BIN)/python bench/bench_reduce.py $(if $(LARGE),--large)
	$(BIN)/python bench/bench_dashboard.py

# mutation testing of the formula modules (docs/mutation.md): mutmut, module by module, only modules whose
# source or tests changed since the last run; MODULE=stats runs one (tools/mutation.py --list names them),
# FULL=1 reruns every mutant. Minutes per module on 2 cores; not part of make test or CI.
MODULE ?=
MUTATION_STAMP := $(VENV)/.mutation-installed
$(MUTATION_STAMP): $(STAMP) requirements-mutation.lock
	$(BIN)/python -m pip install --quiet -r requirements-mutation.lock
	touch $(MUTATION_STAMP)

mutate: $(MUTATION_STAMP)
	$(BIN)/python tools/mutation.py $(MODULE) $(if $(FULL),--full)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mutation
