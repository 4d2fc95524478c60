"""The pgvector store's cost probe (engines.machine.op_costs): ingestion and search batches of
1 to 8 rows, run on a scratch store of the same kind on the same server (an ephemeral table of the
collection `teola_cost_probe`, dropped after), so the probe never writes into the store's own table,
where other processes sharing it would see its rows. Searches are exact scans of the probe's
namespace (what a query's own documents get), top 3. The scratch table is UNLOGGED: its ingestion
may cost a little less than a persistent table's. On this machine's embedded Postgres the probe
adds about 55 ms to the store's start (16 ms without it): the scratch table and its pool, then 15 ms
of ingestion and 20 ms of search batches."""

from __future__ import annotations

import uuid
import zlib
from typing import Any

import numpy as np

from engines.machine.op_costs import ProbeRun, engine_op_costs, probe_words
from engines.requests import PrimOp

OPS = (PrimOp.INGESTION, PrimOp.SEARCHING)
SCRATCH_COLLECTION = "teola_cost_probe"


def probe_vector(dim: int, salt: str) -> list[float]:
    """A unit vector of `dim` numbers, the same for the same salt."""
    v = np.random.default_rng(zlib.crc32(salt.encode())).standard_normal(dim)
    return [float(x) for x in v / np.linalg.norm(v)]


async def vector_store_op_costs(
    store: Any, option: bool | str, scratch_options: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """What the started store `store` (an engines.postgres.vector_store.PgVectorEngine) reports as
    `profile.op_costs`; with option True, measured on a scratch store of its class built with
    `scratch_options` (its server, dimension and index)."""
    if option is not True:
        return await engine_op_costs(store.name, "pgvector", option, {str(op): _unused for op in OPS})
    scratch = type(store)(
        f"{store.name}-cost-probe",
        collection=SCRATCH_COLLECTION,
        persistent=False,
        costs=False,
        **scratch_options,
    )
    await scratch.start()
    try:
        return await engine_op_costs(store.name, "pgvector", True, {str(op): _run(scratch, op) for op in OPS})
    finally:
        await scratch.stop()


def _run(scratch: Any, op: str) -> ProbeRun:
    namespace = f"cost-probe-{uuid.uuid4().hex[:12]}"

    async def batch(n: int, salt: str) -> Any:
        reqs: list[dict[str, Any]]
        if op == PrimOp.INGESTION:
            reqs = [
                {"namespace": namespace, "text": probe_words(i, salt), "embedding": _vector(scratch, salt, i)}
                for i in range(n)
            ]
        else:
            reqs = [
                {"namespace": namespace, "embedding": _vector(scratch, salt, i), "top_k": 3, "exact": True}
                for i in range(n)
            ]
        return await scratch.execute(op, reqs)

    return batch


def _vector(scratch: Any, salt: str, i: int) -> list[float]:
    return probe_vector(scratch.dim, f"{salt} {i}")


async def _unused(n: int, salt: str) -> None:
    raise AssertionError("a profile's or no costs run no probe")
