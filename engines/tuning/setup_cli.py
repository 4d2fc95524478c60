"""`teola setup`, `teola doctor` and `teola tune`: prepare the offline models, check the engine stack
and the engine settings in force, and choose settings by measurement (engines/tuning/tune.py).

Both return a process exit code (0 = ok) and print one line per step, so the CLI can `sys.exit()` them.
"""

from __future__ import annotations

import sys
import traceback

from engines.assets.paths import cache_dir, configure_engine_env


def run_setup() -> int:
    """Prepare every known model into the cache (idempotent); 0 on success, 1 on failure."""
    configure_engine_env()
    print(f"[teola setup] cache: {cache_dir()}", flush=True)
    from engines.assets.models import prepare_models

    try:
        folders = prepare_models(progress=lambda msg: print(f"[teola setup] {msg}", flush=True))
    except Exception as exc:  # reported with its traceback and turned into an exit code
        traceback.print_exc()
        print(f"[teola setup] FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    for name, folder in folders.items():
        print(f"[teola setup] {name}: {folder}", flush=True)
    print("[teola setup] models ready", flush=True)
    return 0


def run_doctor() -> int:
    """Print each check with its fix; 0 when all pass, 1 otherwise."""
    configure_engine_env()
    from engines.assets.models import doctor

    checks = doctor()
    width = max(len(name) for name, _, _ in checks)
    for name, ok, message in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name:<{width}}  {message}", flush=True)
    failed = [name for name, ok, _ in checks if not ok]
    _settings_report()
    print(
        f"{len(checks) - len(failed)}/{len(checks)} checks passed"
        + (f"; failing: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


def _settings_report() -> None:
    """The engine settings in force on this machine and oversubscription warnings (not failures)."""
    from engines.machine.hardware import detect
    from engines.tuning.settings import report

    try:
        lines, warnings = report(detect())
    except ValueError as exc:  # a malformed tuned-settings file
        print(f"FAIL engine settings  {exc}", flush=True)
        return
    for line in lines:
        print(f"     settings  {line}", flush=True)
    for w in warnings:
        print(f"WARN settings  {w}", flush=True)


def run_tune(write: bool = True) -> int:
    """Probe candidate engine settings and keep the fastest (engines.tuning.tune.run_tune)."""
    from engines.tuning.tune import run_tune as tune

    return tune(write)
