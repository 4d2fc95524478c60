"""bench/'s entry points: a few study drivers (bench.common.run_study picks a study with --study), every
other module a library; every command the docs and the front page name runs (result pages name the
command as it was when they were written). No engines: only parsing and imports."""
from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import pytest

from bench.common import run_study

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
DRIVERS = ("rag", "doc_qa", "remote_apps", "programs", "kv_studies", "lamps_studies", "sim_studies",
           "plan_studies", "overheads", "report")
COMMAND = re.compile(r"python -m bench\.([a-z_]+)((?: --study [a-z_]+)?)")


def _with_main() -> set[str]:
    return {p.stem for p in BENCH.glob("*.py") if re.search(r"^def main\(", p.read_text(), re.M)}


def test_at_most_fifteen_entry_points_all_of_them_drivers():
    assert _with_main() == set(DRIVERS)
    assert len(DRIVERS) <= 15


def test_every_study_of_every_driver_has_options_and_a_run():
    for driver in DRIVERS:
        studies = getattr(importlib.import_module(f"bench.{driver}"), "STUDIES", {})
        for study, module in studies.items():
            mod = importlib.import_module(f"bench.{module}")
            assert callable(mod.add_arguments) and callable(mod.run_cli), (driver, study)


@pytest.mark.parametrize("driver", [d for d in DRIVERS if d not in ("rag", "report")])
def test_each_study_parses_its_help(driver, capsys):
    main = importlib.import_module(f"bench.{driver}").main
    for study in importlib.import_module(f"bench.{driver}").STUDIES:
        with pytest.raises(SystemExit) as e:
            main(["--study", study, "--help"])
        assert e.value.code == 0
        assert "--study" in capsys.readouterr().out


def test_every_named_command_is_a_driver_and_its_study():
    pages = [ROOT / "docs" / "benchmarks.md", ROOT / "BENCHMARKS.md", BENCH / "results" / "FRONT.md", ROOT / "README.md"]
    for page in pages:
        for module, study in COMMAND.findall(page.read_text()):
            assert module in DRIVERS, f"{page.name}: python -m bench.{module}"
            if study:
                assert study.split()[-1] in importlib.import_module(f"bench.{module}").STUDIES, page.name


def test_every_driver_and_study_is_in_the_docs():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    for driver in DRIVERS:
        assert f"`python -m bench.{driver}`" in text
        for study in getattr(importlib.import_module(f"bench.{driver}"), "STUDIES", {}):
            assert f"`{study}`" in text, (driver, study)


@pytest.fixture
def fake_study(monkeypatch):
    calls = []
    mod = types.ModuleType("bench.fake_study")
    mod.__doc__ = "A fake study."
    mod.add_arguments = lambda p: p.add_argument("--n", type=int, default=1)
    mod.run_cli = lambda args, argv, p: calls.append((args.study, args.n, argv)) or 0
    monkeypatch.setitem(sys.modules, "bench.fake_study", mod)
    return calls


def test_run_study_passes_the_options_without_study_and_takes_a_default(fake_study):
    studies = {"a": "fake_study", "b": "fake_study"}
    run_study("x", studies, ["--study", "b", "--n", "3"])
    run_study("x", studies, ["--n", "4"], default="a")
    run_study("x", studies, ["--n=5", "--study=a"])
    assert fake_study == [("b", 3, ["--n", "3"]), ("a", 4, ["--n", "4"]), ("a", 5, ["--n=5"])]


def test_run_study_refuses_a_missing_or_unknown_study(fake_study, capsys):
    for argv in ([], ["--study", "c"], ["--stud", "a"]):
        with pytest.raises(SystemExit) as e:
            run_study("x", {"a": "fake_study"}, argv)
        assert e.value.code == 2
    with pytest.raises(SystemExit):
        run_study("x", {"a": "fake_study", "b": "fake_study"}, ["--stud", "b"], default="a")
    assert not fake_study
