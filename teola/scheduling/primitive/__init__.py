"""Teola's engine batching policies (paper §5.2), pure logic behind the `Policy` protocol of
`teola.scheduling.base`: blind FIFO, per-invocation, throughput-oriented and topology-aware. The
program-level policies are `teola.scheduling.program`'s; `teola.scheduling.registry` names them all."""
