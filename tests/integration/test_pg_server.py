"""The embedded server manager: reference counting, stale-server recovery, SIGTERM, external DSNs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest

from engines.postgres.server import PgServerManager, _postmaster_pid, describe_dsn

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import os, signal, sys, time
from engines.postgres.server import acquire_dsn
dsn = acquire_dsn(data_dir=sys.argv[1])
print(dsn, flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(120)
"""


def start_child(data_dir: Path, mode: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data_dir), mode], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    dsn = proc.stdout.readline().strip()
    assert dsn.startswith("postgresql://"), dsn
    return proc, dsn


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def answers(dsn: str) -> bool:
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def test_stale_server_from_killed_run_is_stopped_and_restarted(tmp_path):
    data_dir = tmp_path / "pg"
    proc, _ = start_child(data_dir, "kill")
    assert proc.wait(60) == -signal.SIGKILL
    stale_pid = _postmaster_pid(data_dir)
    assert stale_pid is not None  # the killed run left its server running

    manager = PgServerManager()
    dsn = manager.acquire(data_dir=data_dir)
    try:
        assert manager.last_stale is not None and manager.last_stale.pid == stale_pid
        assert proc.pid in manager.last_stale.dead_owners
        assert gone(stale_pid)
        new_pid = _postmaster_pid(data_dir)
        assert new_pid is not None and new_pid != stale_pid
        assert answers(dsn)
        assert manager.acquire(data_dir=data_dir) == dsn  # second reference, same server
        manager.release(data_dir=data_dir)
        assert _postmaster_pid(data_dir) == new_pid  # one reference left: still running
    finally:
        manager.release(data_dir=data_dir)
    assert _postmaster_pid(data_dir) is None and gone(new_pid)
    assert manager.running() == []


def test_server_shared_with_a_live_process_is_not_treated_as_stale(tmp_path):
    data_dir = tmp_path / "pg"
    proc, dsn = start_child(data_dir, "sleep")
    try:
        pid = _postmaster_pid(data_dir)
        manager = PgServerManager()
        assert manager.acquire(data_dir=data_dir) == dsn
        assert manager.last_stale is None and _postmaster_pid(data_dir) == pid
        manager.release(data_dir=data_dir)
        assert _postmaster_pid(data_dir) == pid  # the other process still holds it
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143  # SIGTERM handler: clean exit, atexit stops the server
    assert _postmaster_pid(data_dir) is None


def test_external_dsn_is_used_as_given(monkeypatch, tmp_path):
    manager = PgServerManager()
    assert manager.acquire(dsn="postgresql://u:secret@db.example/x") == "postgresql://u:secret@db.example/x"
    monkeypatch.setenv("TEOLA_PG_DSN", "postgresql://env@/db")
    assert manager.acquire(data_dir=tmp_path / "unused") == "postgresql://env@/db"
    manager.release()
    assert manager.running() == [] and not (tmp_path / "unused").exists()
    assert describe_dsn("postgresql://u:secret@db.example/x") == "postgresql://u:***@db.example/x"


async def test_unreachable_dsn_fails_with_an_error_naming_it(tmp_path):
    from engines.postgres.vector_store import PgVectorEngine

    dsn = f"postgresql://postgres@/postgres?host={tmp_path}"
    engine = PgVectorEngine("v", dsn=dsn)
    with pytest.raises(
        RuntimeError, match="cannot prepare table 'teola_chunks' on postgresql://postgres@/postgres"
    ):
        await engine.start()
