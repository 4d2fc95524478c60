"""The graph tier: one `QueryRun` per query releases every primitive whose inputs are ready, keeps its object
store, speculation and warm-ups."""
