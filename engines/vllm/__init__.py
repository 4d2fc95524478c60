"""vLLM in process: the adapter, its request rendering, KV swap through teola's connector, `vllm serve`
command lines and step statistics."""
