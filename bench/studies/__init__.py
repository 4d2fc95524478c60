"""bench/studies: see docs/benchmarks.md."""
