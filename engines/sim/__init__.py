"""Simulated engines for the simulator and scheduling tests: cost models, KV admission, devices, the
deterministic test engine."""
