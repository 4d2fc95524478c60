"""bench/lib/tables.py: the one table writer of the study pages and its formatting helpers."""

from __future__ import annotations

from bench.lib.tables import NONE, ci, fixed, machine_facts, num, pct, ratio, table


def test_a_table_has_its_header_rule_and_one_line_per_row():
    lines = table(
        ["system", "mean s", "note"], [["teola", num(1.234, 2), ""], ["LlamaIndex", num(None), "x"]], "lrl"
    )
    assert lines == [
        "| system | mean s | note |",
        "|---|---:|---|",
        "| teola | 1.23 | |",
        "| LlamaIndex | - | x |",
    ]
    assert table(["a"], [])[1] == "|---|"  # left-aligned unless told


def test_missing_values_show_as_a_dash_and_numbers_keep_their_digits():
    assert num(float("nan")) == num(None) == pct(None) == NONE
    assert num(12345.6, 0, ",") == "12,346" and num(0.5) == "0.5"
    assert pct(0.256) == "26%" and pct(0.256, 1) == "25.6%"
    assert fixed(None) == fixed(float("nan")) == "n/a" and fixed(2.0) == "2.00" and fixed(2.0, 0) == "2"


def test_a_ratio_refuses_a_zero_or_missing_bottom():
    assert ratio(3.0, 2.0) == "1.50x" and ratio(3.0, 2.0, 1) == "1.5x"
    assert ratio(1.0, 0.0) == ratio(None, 1.0) == ratio(1.0, None) == NONE


def test_an_interval_and_the_machine_sentence():
    assert ci(1.0234, 0.95, 1.1) == "1.02 [0.95, 1.10]"
    assert (
        machine_facts({"cpu": "EPYC", "cores": 2, "commit": "abc"}) == "Machine: EPYC, 2 cores; commit abc."
    )
    assert machine_facts({}) == "Machine: ?, ? cores; commit ?."
