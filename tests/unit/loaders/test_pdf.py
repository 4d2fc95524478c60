"""The PDF loader on PDFs the tests write: text per page, and each unreadable kind named."""

from __future__ import annotations

import pytest

from teola.loaders import LoaderError, LoaderLimitError, LoaderLimits, load
from tests.unit.loaders.files import make_pdf


def test_text_of_each_page():
    data = make_pdf(["The Eiffel Tower is in Paris", "It was finished in 1889"])
    assert (
        load(data, "application/pdf", "tower.pdf")
        == "The Eiffel Tower is in Paris\n\nIt was finished in 1889"
    )


def test_chosen_by_extension_when_the_type_is_generic():
    assert load(make_pdf(["hello"]), "application/octet-stream", "Report.PDF") == "hello"
    assert load(make_pdf(["hello"]), None, "report.pdf") == "hello"


def problem(data: bytes, limits: LoaderLimits | None = None) -> LoaderError:
    with pytest.raises(LoaderError) as caught:
        load(data, "application/pdf", "doc.pdf", limits)
    assert "'doc.pdf' (PDF)" in str(caught.value)
    return caught.value


def test_encrypted():
    error = problem(make_pdf(["secret"], password="pw"))
    assert error.code == "encrypted_pdf" and "password" in str(error)


def test_encrypted_only_against_editing_opens():
    assert load(make_pdf(["open to read"], password=""), "application/pdf", None) == "open to read"


def test_scanned_pages_have_no_text():
    error = problem(make_pdf(["", ""]))
    assert error.code == "no_text" and "2 page(s)" in str(error) and "OCR" in str(error)


def test_not_a_pdf():
    assert problem(b"<html>not a pdf</html>").code == "not_a_pdf"


@pytest.mark.parametrize("cut", [0.5, 0.1])
def test_truncated(cut):
    data = make_pdf(["one", "two"])
    error = problem(data[: int(len(data) * cut)])
    assert error.code == "corrupt_file" and "damaged" in str(error)


def test_over_the_page_limit():
    with pytest.raises(LoaderLimitError) as caught:
        load(make_pdf(["a", "b", "c"]), "application/pdf", "big.pdf", LoaderLimits(max_pages=2))
    assert caught.value.code == "too_many_pages" and "3 pages; at most 2" in str(caught.value)
    assert caught.value.limit == "max_pages"


def test_over_the_character_limit_stops_early():
    with pytest.raises(LoaderLimitError) as caught:
        load(make_pdf(["x" * 40, "y" * 40, "z"]), "application/pdf", "long.pdf", LoaderLimits(max_chars=50))
    assert caught.value.code == "text_too_long" and "by page 2 of 3" in str(caught.value)
