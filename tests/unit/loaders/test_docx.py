"""The DOCX loader on documents python-docx writes: paragraphs and tables in order, and each
unreadable kind named."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from teola.loaders import LoaderError, LoaderLimitError, LoaderLimits, load
from teola.loaders.registry import DOCX_TYPE
from tests.unit.loaders.files import make_docx


def test_paragraphs_then_table_rows():
    data = make_docx(["Gustave Eiffel", "built a tower."], table=[["year", "height"], ["1889", "300 m"]])
    assert load(data, DOCX_TYPE, "t.docx") == "Gustave Eiffel\nbuilt a tower.\nyear | height\n1889 | 300 m"
    assert load(data, None, "t.docx").startswith("Gustave Eiffel")


def problem(data: bytes, limits: LoaderLimits | None = None) -> LoaderError:
    with pytest.raises(LoaderError) as caught:
        load(data, DOCX_TYPE, "w.docx", limits)
    assert "'w.docx' (DOCX)" in str(caught.value)
    return caught.value


def test_not_a_zip():
    assert "not a zip package" in str(problem(b"plain words"))


def test_old_binary_doc_is_named():
    assert ".doc" in str(problem(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64))


def test_zip_without_a_document():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as package:
        package.writestr("hello.txt", "not word")
    error = problem(out.getvalue())
    assert error.code == "corrupt_file" and "save it again" in str(error)


def test_truncated():
    data = make_docx(["some text"])
    assert problem(data[: len(data) // 2]).code == "corrupt_file"


def test_no_text():
    assert problem(make_docx([])).code == "no_text"


def test_unpacking_past_the_limit():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("word/document.xml", "0" * 200_000)
    with pytest.raises(LoaderLimitError) as caught:
        load(out.getvalue(), DOCX_TYPE, "bomb.docx", LoaderLimits(max_unpacked_bytes=100_000))
    assert caught.value.code == "file_too_large" and "unpack" in str(caught.value)


def test_part_larger_than_its_header_declares():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("word/document.xml", b"0" * 1_000_000)
    data = bytearray(out.getvalue())
    part = zipfile.ZipFile(io.BytesIO(bytes(data))).infolist()[0]
    struct.pack_into("<I", data, part.header_offset + 22, 100)  # local header: uncompressed size
    struct.pack_into("<I", data, data.rfind(b"PK\x01\x02") + 24, 100)  # central directory: the same
    error = problem(bytes(data))
    assert error.code == "corrupt_file" and "damaged zip package" in str(error)
