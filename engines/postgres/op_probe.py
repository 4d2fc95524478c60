"""The pgvector store's cost probe (engines.machine.op_costs): ingestion and search batches of
1 to 8 rows in a namespace of its own, dropped after, so a start leaves no rows behind. Searches
are exact scans of that namespace (what a query's own documents get), top 3. On this machine's
embedded Postgres the two ops' probes take about 0.1 s together."""

from __future__ import annotations

import uuid
import zlib
from typing import Any

import numpy as np

from engines.machine.op_costs import ProbeRun, engine_op_costs, probe_words
from engines.requests import PrimOp


def probe_vector(dim: int, salt: str) -> list[float]:
    """A unit vector of `dim` numbers, the same for the same salt."""
    v = np.random.default_rng(zlib.crc32(salt.encode())).standard_normal(dim)
    return [float(x) for x in v / np.linalg.norm(v)]


async def vector_store_op_costs(engine: Any, option: bool | str) -> dict[str, dict[str, Any]]:
    """What the started store `engine` (an engines.postgres.vector_store.PgVectorEngine) reports as
    `profile.op_costs`."""
    namespace = f"cost-probe-{uuid.uuid4().hex[:12]}"

    def run(op: str) -> ProbeRun:
        async def batch(n: int, salt: str) -> Any:
            reqs: list[dict[str, Any]]
            if op == PrimOp.INGESTION:
                rows = [(probe_words(i, salt), f"{salt} {i}") for i in range(n)]
                reqs = [
                    {"namespace": namespace, "text": t, "embedding": probe_vector(engine.dim, s)}
                    for t, s in rows
                ]
            else:
                reqs = [
                    {
                        "namespace": namespace,
                        "embedding": probe_vector(engine.dim, f"{salt} {i}"),
                        "top_k": 3,
                        "exact": True,
                    }
                    for i in range(n)
                ]
            return await engine.execute(op, reqs)

        return batch

    try:
        return await engine_op_costs(
            engine.name, "pgvector", option, {str(op): run(op) for op in (PrimOp.INGESTION, PrimOp.SEARCHING)}
        )
    finally:
        if option is True:
            await engine.drop_namespace(namespace)
