"""Where `teola run` and `teola serve` send the engines' output.

By default (`OutputLog`) the terminal shows teola's own lines only: progress, the answer, the timing
table, teola's warnings and errors, and uvicorn's lines. Everything else goes to a log file under the
cache directory (`<cache>/logs/<command>-<timestamp>-<pid>.log`): Python logging records (vLLM,
transformers, sentence-transformers, httpx, ...), Python warnings, and whatever is written to file
descriptors 1 and 2, which catches torch's C++ messages, tqdm bars and the output of child processes
(vLLM's engine-core process inherits the redirected descriptors). teola writes its own lines to
duplicates of the original descriptors (`terminal_out()` / `terminal_err()`); the descriptors are
restored when the command ends. `--verbose` skips all this: everything stays on the terminal.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

TAIL_LINES = 30  # log lines shown when a command fails
KEEP_LOGS = 20  # older log files are deleted
ECHO_LOGGERS = ("teola",)  # their WARNING and above also reach the terminal
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_terminal: dict[str, TextIO] = {}  # "out" / "err" while an OutputLog is active


def terminal_out() -> TextIO:
    """Where teola's own standard output goes: the real stdout even while an OutputLog is active."""
    return _terminal.get("out") or sys.stdout


def terminal_err() -> TextIO:
    """Where teola's own progress and error lines go: the real stderr even while an OutputLog is active."""
    return _terminal.get("err") or sys.stderr


def logs_dir() -> Path:
    """`<cache>/logs` (engines.assets.paths.cache_dir(); ~/.cache/teola without the engines package)."""
    try:
        from engines.assets.paths import cache_dir

        base = cache_dir()
    except ImportError:
        base = Path.home() / ".cache" / "teola"
    path = base / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_log_path(command: str) -> Path:
    """A fresh log file path for `command`; the oldest logs beyond KEEP_LOGS are deleted."""
    folder = logs_dir()
    old = sorted(folder.glob("*.log"), key=lambda p: p.stat().st_mtime)
    for path in old[: max(0, len(old) - KEEP_LOGS + 1)]:
        path.unlink(missing_ok=True)
    return folder / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last non-empty lines of a log; of a progress bar redrawn with '\\r', its last state."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 256 * 1024))
            text = f.read().decode("utf-8", "backslashreplace")
    except OSError:
        return []
    out = []
    for line in text.split("\n"):
        states = [s.rstrip() for s in line.split("\r") if s.strip()]
        if states:
            out.append(states[-1][:400])
    return out[-lines:]


class _EchoFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING and any(
            record.name == name or record.name.startswith(name + ".") for name in ECHO_LOGGERS
        )


class OutputLog:
    """Context manager: third-party output goes to `path` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._saved_fds: dict[int, int] = {}
        self._saved_streams: dict[str, Any] = {}
        self._handlers: list[logging.Handler] = []
        self._root_level = logging.NOTSET

    def __enter__(self) -> OutputLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", buffering=1, encoding="utf-8", errors="backslashreplace")
        for name, fd in (("out", 1), ("err", 2)):
            self._redirect(name, fd)
        self._route_logging()
        return self

    def _redirect(self, name: str, fd: int) -> None:
        """Point descriptor `fd` at the log; keep the terminal as `_terminal[name]`."""
        attr = "stdout" if fd == 1 else "stderr"
        stream = getattr(sys, attr)
        _flush(stream)
        saved = self._saved_fds[fd] = os.dup(fd)
        if _fileno(stream) == fd:  # the usual case: sys.stdout/err write to fd 1/2, hence to the log below
            _terminal[name] = open(
                saved,
                "w",
                buffering=1,
                encoding=getattr(stream, "encoding", None) or "utf-8",
                errors="backslashreplace",
                closefd=False,
            )
        else:  # sys.stdout/err were replaced (e.g. captured by pytest): keep that object as the terminal
            _terminal[name] = stream
            self._saved_streams[attr] = stream
            setattr(
                sys,
                attr,
                open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False),
            )
        os.dup2(self._file.fileno(), fd)

    def _route_logging(self) -> None:
        root = logging.getLogger()
        to_file = logging.StreamHandler(self._file)
        to_file.setFormatter(logging.Formatter(_FORMAT))
        echo = logging.StreamHandler(terminal_err())
        echo.addFilter(_EchoFilter())
        echo.setFormatter(logging.Formatter("[%(name)s] %(levelname)s: %(message)s"))
        self._handlers = [to_file, echo]
        for handler in self._handlers:
            root.addHandler(handler)
        self._root_level = root.level
        if root.level == logging.NOTSET or root.level > logging.INFO:
            root.setLevel(logging.INFO)
        logging.captureWarnings(True)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        logging.captureWarnings(False)
        root = logging.getLogger()
        for handler in self._handlers:
            root.removeHandler(handler)
        root.setLevel(self._root_level)
        for attr in ("stdout", "stderr"):
            _flush(getattr(sys, attr))
        for attr, stream in self._saved_streams.items():
            setattr(sys, attr, stream)
        for name, fd in (("out", 1), ("err", 2)):
            _flush(_terminal.pop(name, None))
            os.dup2(self._saved_fds[fd], fd)
            os.close(self._saved_fds.pop(fd))
        self._file.close()
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            print(f"[teola] engine and library output of this run: {self.path}", file=sys.stderr, flush=True)
        elif exc_type is not None and not (issubclass(exc_type, SystemExit) and exc.code in (0, None)):
            self.report_failure()  # an exception (or sys.exit(code), as uvicorn's on a failed start-up)

    def report_failure(self, stream: TextIO | None = None) -> None:
        """Print the last lines of the log (after a failure), naming the file."""
        stream = stream or terminal_err()
        lines = tail(self.path)
        if not lines:
            print(f"[teola] the log {self.path} is empty", file=stream, flush=True)
            return
        print(f"[teola] the end of the log {self.path}:", file=stream)
        for line in lines:
            print(f"    {line}", file=stream)
        stream.flush()


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's logging config, its handlers writing to the terminal (not to the log) while an
    OutputLog is active; its own default otherwise."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    if not _terminal:
        return LOGGING_CONFIG
    config = copy.deepcopy(LOGGING_CONFIG)
    streams = {"default": terminal_err(), "access": terminal_out()}
    for name, handler in config.get("handlers", {}).items():
        if name in streams and "stream" in handler:
            handler["stream"] = streams[name]
    for formatter in config.get("formatters", {}).values():
        if "use_colors" in formatter or formatter.get("()", "").startswith("uvicorn."):
            formatter["use_colors"] = _isatty(terminal_err())
    return config


def _fileno(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _flush(stream: Any) -> None:
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):
        pass


def run_logged(command: str, run: Callable[[], int]) -> int:
    """`run()` inside an OutputLog for `command`: the log file is named first; when `run()` fails (an
    exit code other than 0 and 130, or an exception) the last lines of the log follow the error."""
    log = OutputLog(new_log_path(command))
    with log:
        print(
            f"[teola] engine and library output (vLLM, torch, transformers, ...) goes to {log.path}; "
            "--verbose shows it here",
            file=terminal_err(),
            flush=True,
        )
        code = run()
    if code not in (0, 130):
        log.report_failure()
    return code
