"""Batched KV-block swap: the kernel binding (`_native/`, built from `csrc/`), the saved-block index and the
swap-or-recompute choice."""
