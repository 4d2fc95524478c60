"""Supervision of the embedded PostgreSQL: when its postmaster is killed the runtime's probe marks
the vector store down, the supervisor restarts the adapter, which starts the server again, and
the store serves ingestion and search again (own data directory: the session's server is not touched)."""

from __future__ import annotations

import os
import signal

from engines.postgres.server import default_manager
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from tests.support.waiting import until


async def test_a_killed_embedded_postgres_is_detected_and_restarted(tmp_path):
    data_dir = tmp_path / "pg"
    runtime = Runtime(
        {"vectordb": Engine("vectordb", kind="pgvector", data_dir=str(data_dir), persistent=False)},
        health_interval=0.2,
        restart_backoff=(0.2, 1.0),
    )
    await runtime.start()
    try:
        store = runtime.instances["vectordb"][0].handle
        assert (
            await store.ingest([{"embedding": [1.0] + [0.0] * 383, "text": "before", "namespace": "n"}]) == 1
        )
        pid = default_manager().server_pid(data_dir)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await until(lambda: not runtime.health()["vectordb"]["healthy"], timeout=30)
        await until(lambda: runtime.health()["vectordb"]["healthy"], timeout=90)
        new_pid = default_manager().server_pid(data_dir)
        assert new_pid not in (None, pid)
        assert runtime.metrics.engine_failures == 1 and runtime.metrics.engine_restarts == 1
        store = runtime.instances["vectordb"][0].handle
        assert (
            await store.ingest([{"embedding": [0.0, 1.0] + [0.0] * 382, "text": "after", "namespace": "n"}])
            == 1
        )
        hits = await store.search([{"embedding": [0.0, 1.0] + [0.0] * 382, "namespace": "n", "top_k": 1}])
        assert hits[0][0]["text"] == "after"
    finally:
        await runtime.stop()
    assert default_manager().server_pid(data_dir) is None  # the last reference stopped it
