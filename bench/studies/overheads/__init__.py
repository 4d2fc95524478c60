"""bench/studies/overheads: see docs/benchmarks.md."""
