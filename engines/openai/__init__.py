"""Engines behind OpenAI-compatible HTTP APIs (`vllm serve` and others): LLM completions and embeddings."""
