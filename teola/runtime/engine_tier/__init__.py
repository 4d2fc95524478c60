"""The engine tier: one scheduler per engine batches entries from all queries under a policy and runs the
batches on the engine's instances (streaming, preemption, failure isolation, supervision)."""
