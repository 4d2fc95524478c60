"""Links into bench/results resolve: every relative link of README.md, BENCHMARKS.md, docs/*.md and the
study pages (bench/results/**/*.md) that points into bench/results names a file that exists, and so does
every page or plot (bench/results/.../<name>.md or .png) these pages name in their text; JSON files they
name may be uncommitted (a run's raw traces, a command's input)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import bench.lib.catalog as catalog
from bench.lib.results import RESULTS, ROOT

LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target) and ![alt](target)
MENTION = re.compile(r"bench/results/(?:[a-z]+/)*[A-Za-z0-9_.-]+\.(?:md|png)")


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))] + sorted(
        RESULTS.rglob("*.md")
    )


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` that point into bench/results (any relative link of a page that is
    itself under bench/results) and name no existing file."""
    broken = []
    for target in LINK.findall(page.read_text()):
        path = target.split("#", 1)[0]
        if not path or re.match(r"[a-z]+:", path):  # an anchor in the page, a URL
            continue
        resolved = (page.parent / path).resolve()
        into_results = resolved.is_relative_to(RESULTS) or page.is_relative_to(RESULTS)
        if into_results and not resolved.exists():
            broken.append(target)
    return broken


def broken_mentions(page: Path) -> list[str]:
    """The pages and plots bench/results/.../<file> named in `page`'s text that do not exist."""
    return [m for m in MENTION.findall(page.read_text()) if not (ROOT / m).exists()]


def test_every_link_into_the_results_resolves():
    broken = {str(p.relative_to(ROOT)): b for p in pages() if (b := broken_links(p))}
    assert not broken, f"links to missing files: {broken}"


def test_every_results_path_named_in_the_pages_exists():
    broken = {str(p.relative_to(ROOT)): b for p in pages() if (b := broken_mentions(p))}
    assert not broken, f"paths of missing files: {broken}"


def test_the_pages_are_checked():
    names = {p.relative_to(ROOT).as_posix() for p in pages()}
    assert {"README.md", "BENCHMARKS.md", "bench/results/INDEX.md", "bench/results/FRONT.md"} <= names
    assert any(n.startswith("bench/results/rag/") for n in names)


def test_a_broken_link_is_found(tmp_path, monkeypatch):
    results = tmp_path / "bench" / "results"
    (results / "rag").mkdir(parents=True)
    (results / "sim").mkdir()
    (results / "sim" / "b.md").write_text("# b\n")
    page = results / "rag" / "a.md"
    page.write_text(
        "[ok](../sim/b.md) [gone](b.md) [moved](../b.md#top) [web](https://x.org/y.md) [here](#a)"
    )
    monkeypatch.setattr(sys.modules[__name__], "RESULTS", results)
    assert broken_links(page) == ["b.md", "../b.md#top"]
    doc = tmp_path / "docs" / "d.md"
    doc.parent.mkdir()
    doc.write_text("[in](../bench/results/sim/b.md) [out](../bench/results/rag/b.md) [other](../README.md)")
    assert broken_links(doc) == ["../bench/results/rag/b.md"]


def test_each_study_writes_into_the_folder_of_its_subject():
    """A study's module lives in bench/studies/<subject>/ and names that subject when it writes."""
    for study in catalog.STUDIES:
        if study.module.startswith("studies."):
            assert study.module.split(".")[1] == study.subject, study.name
    for path in (ROOT / "bench" / "studies").rglob("*.py"):
        named = set(re.findall(r"subject=\"(\w+)\"|results_dir\(\"(\w+)\"\)", path.read_text()))
        assert {s for pair in named for s in pair if s} <= {path.parent.name}, path
