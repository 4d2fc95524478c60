# The two quick-start commands. Both set up everything they need first (idempotent).
.PHONY: run test check setup

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/python -m teola.cli run advanced_rag

test: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider

# The fast loop: every test that needs no engine and starts no service (under 2 minutes on 2 cores).
check: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider -m "not engines and not services and not slow"
