"""bench/studies/kv: see docs/benchmarks.md."""
