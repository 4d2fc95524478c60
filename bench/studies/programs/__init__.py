"""bench/studies/programs: see docs/benchmarks.md."""
