# The two set-up commands of the README: `make demo` and `make test`.
# Both create .venv when it is missing and install every distribution of the repo.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PLUGINS := $(sort $(dir $(wildcard examples/*/pyproject.toml sources/*/pyproject.toml strategies/*/pyproject.toml integrations/*/pyproject.toml embedders/*/pyproject.toml)))
PACKAGES := $(wildcard $(addsuffix mnemon_*,$(PLUGINS)))
MANIFESTS := pyproject.toml testing/pyproject.toml $(addsuffix pyproject.toml,$(PLUGINS))
# a distribution's `test` extra holds what only its own tests need (mnemon-otel: the OTel SDK)
EDITABLE := $(foreach p,$(PLUGINS),-e '$(p)$(if $(shell grep -l '^test = ' $(p)pyproject.toml),[test])')
STAMP := $(VENV)/.installed

.PHONY: demo test lint types contracts bench clean dist-check config-schemas

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python $(MANIFESTS) Makefile
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# the core was called `mnemon` before; an old editable install of it would linger
	-@$(BIN)/python -m pip uninstall --quiet --yes mnemon >/dev/null 2>&1
	$(BIN)/python -m pip install --quiet -e '.[dev,cli]' -e 'testing/[test]' $(EDITABLE)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mnemon demo

test: $(STAMP)
	$(BIN)/python -m pytest -n auto
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy mnemon testing/mnemon_testing $(PACKAGES) benchmarks
	$(BIN)/lint-imports

# build every distribution as a wheel, install the wheels into a fresh venv outside the
# repository, discover the plugins by entry point, run their tests and the examples there
dist-check: $(STAMP)
	$(BIN)/python .ci/dist_check.py

# every first-party manifest's config_schema, written from the plugin's configuration model
# (tests/test_plugin_manifests.py fails when one is stale)
config-schemas: $(STAMP)
	$(BIN)/python .ci/config_schemas.py

bench: $(STAMP)
	$(BIN)/python benchmarks/compose.py

clean:
	rm -rf $(VENV) .mnemon-demo .pytest_cache .mypy_cache .ruff_cache
