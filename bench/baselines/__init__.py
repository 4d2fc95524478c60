"""bench/baselines: see docs/benchmarks.md."""
