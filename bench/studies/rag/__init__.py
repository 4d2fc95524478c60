"""bench/studies/rag: see docs/benchmarks.md."""
