# The two quick-start commands. Both set up everything they need first (idempotent).
.PHONY: run test setup

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/python -m teola.cli run advanced_rag

test: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider
