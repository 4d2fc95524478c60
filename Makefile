# The quick-start commands. Each sets up everything it needs first (idempotent).
.PHONY: run test check lint format format-check setup

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/python -m teola.cli run advanced_rag

# Every test exactly once, in two runs split by marker (together they select the whole suite): the tests
# that need no engine, start no service and time nothing on the wall clock on two pytest-xdist workers,
# then the rest in one process, so each session engine starts once. The second runs whatever the first
# gives; a failure of either fails the target. The second prints its 30 slowest set-ups and tests: where
# the suite's time goes, in every CI log.
FAST := not engines and not services and not slow
PARALLEL := $(FAST) and not wall_clock
test: setup
	status=0; \
	.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 -m "$(PARALLEL)" || status=$$?; \
	.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 -m "not ($(PARALLEL))" || status=$$?; \
	exit $$status

# What CI runs before the tests: the linter and the formatter's check on the whole tree, the type
# checker on teola/ and engines/ (strict on the seam between the tiers and the engines). Settings:
# pyproject.toml.
lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# The fast loop: the checks, then every test that needs no engine and starts no service.
check: lint
	.venv/bin/python -m pytest -q -p no:cacheprovider -m "$(FAST)"

# ruff format on the whole tree, then the layering test (file and function caps): formatting can push
# a file past 400 lines or a function past 60 (docs/contributing.md).
format: setup
	bash scripts/format.sh

format-check: setup
	bash scripts/format.sh --check
