"""bench/studies/plan: see docs/benchmarks.md."""
