"""`teola bench` reads bench/'s table of studies as text (teola does not import bench): an entry's
name is found whether it sits on the entry's first line or, as a formatter lays a long entry out, on
the next one."""

from teola.cli_machine import _bench_suites


def test_study_names_are_read_on_one_line_or_formatted_over_several(tmp_path):
    (tmp_path / "bench" / "lib").mkdir(parents=True)
    (tmp_path / "bench" / "lib" / "catalog.py").write_text(
        'STUDIES = [\n    S("compile", "x", "compile graphs"),\n    S(\n        "sim_fidelity",\n'
        '        "bench.studies.sim.sim_fidelity",\n    ),\n]\nnot_a_study = S2("nope")\n'
    )
    assert _bench_suites(tmp_path) == ["list", "report", "compile", "sim_fidelity"]
    assert _bench_suites(tmp_path / "elsewhere") == []
