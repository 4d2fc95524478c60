"""bench/lib/plots.py: latency against load drawn from a page's JSON (no engines, no benchmark run)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from bench.lib import (
    plots,  # noqa: E402
    report,  # noqa: E402
)
from bench.lib.results import result_dirs  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
RESULTS = Path(plots.__file__).parents[1] / "results"
FOLDERS = result_dirs()


def _summary(mean: float) -> dict:
    return {"n": 4, "mean": mean, "p50": mean, "p99": mean * 1.5}


def _pooled_page() -> dict:
    """A doc_qa trials page: two systems, alone and two load points, two trials each."""

    def entry(mean: float, trial_means: list[float], rates: list[float | None]) -> dict:
        return {
            "summary": _summary(mean),
            "trials": [{"summary": _summary(m)} for m in trial_means],
            "rates": rates,
        }

    runs = {
        "alone": {
            "teola": entry(2.0, [1.8, 2.2], [None, None]),
            "LlamaIndex": entry(3.0, [2.9, 3.1], [None, None]),
        },
        "x1": {"teola": entry(2.5, [2.4, 2.7], [0.3, 0.5]), "LlamaIndex": entry(4.0, [3.5, 4.4], [0.3, 0.5])},
        "x2": {"teola": entry(3.5, [3.0, 3.9], [0.6, 1.0]), "LlamaIndex": entry(6.0, [5.0, 7.0], [0.6, 1.0])},
    }
    return {
        "machine": {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2},
        "runs": ["t0", "t1"],
        "pooled": {"apps": {"advanced_rag/small": {"runs": runs}}},
    }


def test_a_page_with_one_load_gets_no_plot(tmp_path):
    """One load point per system is no curve: nothing is drawn (a study run at one load)."""
    page = _pooled_page()
    runs = page["pooled"]["apps"]["advanced_rag/small"]["runs"]
    del runs["alone"], runs["x2"]
    (tmp_path / "page.json").write_text(json.dumps(page))
    assert plots.write_load_plot("page", tmp_path) is None
    assert not (tmp_path / "page_vs_load.png").exists()


def test_a_trials_page_draws_its_means_and_trial_spread(tmp_path):
    (tmp_path / "page.json").write_text(json.dumps(_pooled_page()))
    path = plots.write_load_plot("page", tmp_path)
    assert path == tmp_path / "page_vs_load.png"
    assert path.read_bytes().startswith(PNG)
    assert path.stat().st_size < 100 * 1024
    panels = plots.series(_pooled_page())
    assert list(panels) == ["advanced_rag/small"]
    teola, li = panels["advanced_rag/small"]["teola"], panels["advanced_rag/small"]["LlamaIndex"]
    assert list(panels["advanced_rag/small"]) == ["teola", "LlamaIndex"]  # teola first
    assert teola.rate == pytest.approx([0.0, 0.4, 0.8])  # alone at 0; the trials' mean offered rate
    assert teola.mean == [2.0, 2.5, 3.5]
    assert teola.low == [1.8, 2.4, 3.0] and teola.high == [2.2, 2.7, 3.9]
    assert li.mean == [3.0, 4.0, 6.0] and li.low == [2.9, 3.5, 5.0] and li.high == [3.1, 4.4, 7.0]


def test_draw_returns_what_it_plotted(tmp_path):
    drawn = plots.draw(_pooled_page(), tmp_path / "x.png", "x")
    assert drawn["advanced_rag/small"]["LlamaIndex"].mean == [3.0, 4.0, 6.0]
    assert (tmp_path / "x.png").read_bytes().startswith(PNG)


def test_one_doc_qa_run_has_no_band():
    page = {
        "runs": {
            "naive_rag/small": {
                "x2": {
                    "rate": 0.4,
                    "fraction": 2.0,
                    "teola": {"mean": 5.0, "n": 8},
                    "LlamaIndex": {"mean": 6.0, "n": 8},
                },
                "alone": {"teola": {"mean": 1.0, "n": 4}, "LlamaIndex": {"mean": 1.5, "n": 4}},
                "x1": {
                    "rate": 0.2,
                    "fraction": 1.0,
                    "teola": {"mean": 2.0, "n": 8},
                    "LlamaIndex": {"mean": 2.5, "n": 8},
                },
            }
        }
    }
    s = plots.series(page)["naive_rag/small"]["teola"]
    assert s.rate == [0.0, 0.2, 0.4] and s.mean == [1.0, 2.0, 5.0] and s.low == s.mean == s.high


def test_remote_apps_and_programs_pages():
    remote = {
        "apps": {
            "tool_agent": {
                "bounds": [1.0],
                "runs": {
                    "alone": {
                        "teola": {
                            "rate": None,
                            "summary": _summary(2.0),
                            "trials": [{"summary": _summary(2.0)}],
                        }
                    },
                    "1": {
                        "teola": {
                            "rate": 1.0,
                            "summary": _summary(3.0),
                            "trials": [{"summary": _summary(2.5)}, {"summary": _summary(3.5)}],
                        }
                    },
                },
            }
        }
    }
    s = plots.series(remote)["tool_agent"]["teola"]
    assert s.rate == [0.0, 1.0] and s.mean == [2.0, 3.0] and s.low == [2.0, 2.5] and s.high == [2.0, 3.5]
    heavy = {
        "kind": "react",
        "rows": [],
        "summary": [
            {"rate": 2.0, "policy": "fcfs", "mean": 8.0, "mean_range": [7.0, 9.0]},
            {"rate": 1.0, "policy": "fcfs", "mean": 5.0, "mean_range": [4.5, 5.5]},
            {"rate": 1.0, "policy": "atlas", "mean": 6.0, "mean_range": [6.0, 6.0]},
        ],
    }
    panels = plots.series(heavy)["react programs"]
    assert panels["fcfs"].rate == [1.0, 2.0] and panels["fcfs"].mean == [5.0, 8.0]
    assert panels["fcfs"].low == [4.5, 7.0] and panels["fcfs"].high == [5.5, 9.0]
    assert plots.unit(heavy) == "programs/s" and plots.unit(remote) == "queries/s"


def test_a_lamps_real_page_draws_the_mean_over_its_trial_rows():
    rows = [
        {"rate": r, "trial": k, "system": s, "mean_s": m}
        for r, s, ms in [(2.4, "LAMPS", [5.0, 7.0]), (1.2, "LAMPS", [3.0, 4.0]), (1.2, "SJF", [4.0, 6.0])]
        for k, m in enumerate(ms)
    ]
    panels = plots.series({"rows": rows, "trials": 2})
    (flow,) = panels
    lamps = panels[flow]["LAMPS"]
    assert (
        lamps.rate == [1.2, 2.4]
        and lamps.mean == [3.5, 6.0]
        and lamps.low == [3.0, 5.0]
        and lamps.high == [4.0, 7.0]
    )
    assert panels[flow]["SJF"].mean == [5.0]
    assert plots.unit({"rows": rows}) == "requests/s"


def test_a_page_without_load_points_draws_nothing(tmp_path):
    (tmp_path / "flood.json").write_text(json.dumps({"alone": {"p99": 1.0}, "flooded": {"p99": 2.0}}))
    assert plots.write_load_plot("flood", tmp_path) is None
    assert not (tmp_path / "flood_vs_load.png").exists()
    with pytest.raises(SystemExit, match="no load points"):
        plots.redraw(["flood"], tmp_path)
    with pytest.raises(SystemExit, match="no .*missing.json"):
        plots.redraw(["missing"], tmp_path)


def test_labels_host_and_notes():
    assert plots.host({"machine": {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2}}) == "Intel Xeon, 2 cores"
    assert (
        plots.host({"machine": {"cpu": "AMD EPYC 7763 64-Core Processor", "cores": 2}}) == "AMD EPYC, 2 cores"
    )
    assert plots.note("sim_paper", {}) == "SIMULATED"
    assert plots.note("x", {"settings": {"llm_emulated": True}}) == "LLM emulated"
    assert plots.note("doc_qa_ce_trials", {}) is None


def test_redraw_without_names_redraws_every_plot_in_the_folder(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(_pooled_page()))
    plots.write_load_plot("a", tmp_path)
    (tmp_path / "a_vs_load.png").write_bytes(b"stale")
    assert plots.redraw(None, tmp_path) == [tmp_path / "a_vs_load.png"]
    assert (tmp_path / "a_vs_load.png").read_bytes().startswith(PNG)


COMMITTED = sorted(
    p.with_name(p.name[: -len(plots.SUFFIX)]) for f in FOLDERS for p in f.glob(f"*{plots.SUFFIX}")
)


def test_the_front_page_shows_committed_plots():
    front = (RESULTS / "FRONT.md").read_text()
    shown = re.findall(r"!\[[^\]]*\]\(([a-z]+/[A-Za-z0-9_.-]+_vs_load\.png)\)", front)
    assert shown, "FRONT.md shows no latency-against-load plot"
    assert all((RESULTS / png).exists() for png in shown)
    assert (
        report.LINK.sub(lambda m: f"](bench/results/{m.group(1)})", f"![x]({shown[0]})")
        == f"![x](bench/results/{shown[0]})"
    )  # BENCHMARKS.md at the root links the same file


@pytest.mark.parametrize("base", COMMITTED, ids=lambda p: p.name)
def test_each_committed_plot_is_redrawn_from_its_json(base, tmp_path):
    name = base.name
    data = json.loads(base.with_name(f"{name}.json").read_text())
    panels = plots.draw(data, tmp_path / f"{name}{plots.SUFFIX}", name)
    assert panels and all(len(s.rate) >= 2 for c in panels.values() for s in c.values())
    assert (tmp_path / f"{name}{plots.SUFFIX}").read_bytes().startswith(PNG)
    assert base.with_name(f"{name}{plots.SUFFIX}").stat().st_size < 100 * 1024
