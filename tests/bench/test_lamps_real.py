"""bench.studies.programs.lamps_real's options and table (no engines: the run itself is a benchmark)."""

from __future__ import annotations

import pytest

from bench.studies.programs import lamps_real


def row(system: str, mean: float) -> dict:
    return {
        "rate": 1.2,
        "trial": 0,
        "system": system,
        "mean_s": mean,
        "p99_s": 2 * mean,
        "ttft_mean_s": 1.0,
        "ttft_p99_s": 2.0,
        "handlings": {"preserve": 3, "discard": 0, "swap": 1},
        "swap": {"saves": 1, "loads": 0},
    }


def test_an_unknown_system_is_refused_before_any_engine_starts(capsys):
    from bench.__main__ import main

    with pytest.raises(SystemExit):
        main(["lamps_real", "--systems", "LAMPS,Nope"])
    assert "--systems" in capsys.readouterr().err


def test_the_table_has_a_row_per_system_run_and_compares_lamps_with_each():
    data = {
        "command": "x",
        "wall_s": 60.0,
        "load": 1.0,
        "cap": 8,
        "requests": 1,
        "trials": 1,
        "rows": [row("FCFS-request+INFERCEPT", 20.0), row("LAMPS", 15.0)],
    }
    text = lamps_real.markdown(data)
    fcfs_request = next(line for line in text.splitlines() if "| FCFS-request+INFERCEPT |" in line)
    assert "-25%" in fcfs_request
    assert "| SJF |" not in text  # not run, not shown
