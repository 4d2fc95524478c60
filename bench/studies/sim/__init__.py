"""bench/studies/sim: see docs/benchmarks.md."""
