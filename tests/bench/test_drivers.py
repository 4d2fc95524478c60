"""bench/'s one entry point, `python -m bench STUDY [options]`, and its table of studies
(bench/lib/catalog.py): every study imports and parses its options, the docs list every study, and every
command the docs and the front page name is a study of the table (result pages name the command as it
was when they were written). No engines: only parsing and imports."""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import pytest

import bench.lib.catalog as catalog
from bench.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
COMMAND = re.compile(r"python -m bench(\.[a-z_]+| [a-z_]+)")


def test_study_names_are_unique_and_every_subject_is_described():
    names = [s.name for s in catalog.STUDIES]
    assert len(names) == len(set(names)) and "list" not in names and "report" not in names
    assert {s.subject for s in catalog.STUDIES} == set(catalog.SUBJECTS)


@pytest.mark.parametrize("study", [s.name for s in catalog.STUDIES])
def test_each_study_imports_and_parses_its_help(study, capsys):
    spec = catalog.BY_NAME[study]
    module = importlib.import_module(f"bench.{spec.module}")
    assert callable(module.main) if spec.main else callable(module.add_arguments) and callable(module.run_cli)
    with pytest.raises(SystemExit) as e:
        main([study, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and (spec.main or f"python -m bench {study}" in out)


def test_list_prints_every_study_and_an_unknown_study_is_refused(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^{s.name} ", out, re.M) for s in catalog.STUDIES)
    assert main(["no_such_study"]) == 2
    assert "python -m bench list" in capsys.readouterr().err
    assert main([]) == 2


def test_the_docs_hold_the_table_of_studies():
    assert catalog.markdown_table() in (ROOT / "docs" / "benchmarks.md").read_text()


def test_every_named_command_is_a_study():
    pages = [
        ROOT / "docs" / "benchmarks.md",
        ROOT / "BENCHMARKS.md",
        BENCH / "results" / "FRONT.md",
        ROOT / "README.md",
    ]
    for page in pages:
        for name in COMMAND.findall(page.read_text()):
            assert name[1:] in {*catalog.BY_NAME, "list", "report", "STUDY"} and name[0] == " ", (
                f"{page.name}: {name}"
            )


@pytest.fixture
def fake_study(monkeypatch):
    calls = []
    mod = types.ModuleType("bench.fake_study")
    mod.__doc__ = "A fake study."
    mod.add_arguments = lambda p: p.add_argument("--n", type=int, default=1)
    mod.run_cli = lambda args, argv, p: calls.append((args.n, argv)) or 0
    monkeypatch.setitem(sys.modules, "bench.fake_study", mod)
    monkeypatch.setitem(catalog.BY_NAME, "fake", catalog.Study("fake", "fake_study", "rag", "nothing", False))
    return calls


def test_a_study_gets_its_options_as_given(fake_study):
    assert main(["fake", "--n", "3"]) == 0
    assert main(["fake"]) == 0
    assert fake_study == [(3, ["--n", "3"]), (1, [])]
