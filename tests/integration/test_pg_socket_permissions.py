"""The embedded PostgreSQL trusts whoever opens its Unix socket (issue 71, low): the socket, and the
directory pgserver moves it to when the data directory's path is too long for one, belong to the
server's OS user alone (own data directories: the session's server is not touched)."""

from __future__ import annotations

import stat
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from engines.postgres.server import PgServerManager


def socket_dir(dsn: str) -> Path:
    return Path(parse_qs(urlsplit(dsn).query)["host"][0])


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    "long_path", [False, True], ids=["socket in the data dir", "socket moved for a long path"]
)
def test_only_the_servers_user_may_open_its_socket(tmp_path, long_path):
    data_dir = (tmp_path / ("d" * 70) / ("e" * 40) / "pg") if long_path else tmp_path / "pg"
    manager = PgServerManager()
    dsn = manager.acquire(data_dir=data_dir)
    try:
        folder = socket_dir(dsn)
        assert (folder.resolve() != data_dir.resolve()) is long_path
        assert mode(folder / ".s.PGSQL.5432") == 0o700
        assert mode(folder) & 0o077 == 0
        with psycopg.connect(dsn) as conn:  # its own user still connects
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        manager.release(data_dir=data_dir)
