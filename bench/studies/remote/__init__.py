"""bench/studies/remote: see docs/benchmarks.md."""
