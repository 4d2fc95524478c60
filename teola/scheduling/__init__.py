"""Every scheduling decision of the engine tier, as pure logic with no I/O: the `Policy` protocol and
its queues (`base.py`), Teola's batching policies (`primitive/`), program-level LLM scheduling
(`program/`: Autellix, LAMPS), the process table, the preemption rules and the registry of policies
by name (`registry.py`). The engine tier (teola/runtime/engine_tier/) applies them to engines."""
