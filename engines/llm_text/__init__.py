"""LLM output and prompt helpers shared by every LLM adapter (in process, remote, simulated): streamed-list
parsing and partial-prefill memo."""
