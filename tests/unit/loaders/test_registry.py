"""Choosing a loader by content type or extension, and the limits every loader shares."""

from __future__ import annotations

import pytest

from teola.loaders import LoaderLimitError, LoaderLimits, UnsupportedFileType, load
from teola.loaders.registry import parse_content_type


def test_plain_text_and_other_text_types():
    assert load("caf\u00e9".encode(), "text/plain", None) == "caf\u00e9"
    assert load(b"\xef\xbb\xbfbom dropped", "text/plain; charset=utf-8", None) == "bom dropped"
    assert load(b"a,b\n1,2", "text/csv", "t.csv") == "a,b\n1,2"


def test_generic_type_with_unknown_extension_is_read_as_text_if_it_decodes():
    assert load(b"notes", "application/octet-stream", "notes") == "notes"
    with pytest.raises(UnsupportedFileType) as caught:
        load(b"\x89PNG\r\n\x1a\n\xff", "application/octet-stream", "picture.png")
    assert "neither UTF-8 text nor a supported type" in str(caught.value)


def test_unknown_type_names_the_supported_ones():
    with pytest.raises(UnsupportedFileType) as caught:
        load(b"\x89PNG", "image/png", "p.png")
    message = str(caught.value)
    assert caught.value.code == "unsupported_media_type" and "'p.png'" in message
    for kind in ("application/pdf", "text/html", "text/markdown", "wordprocessingml", "text/plain"):
        assert kind in message


def test_input_bytes_limit_comes_first():
    with pytest.raises(LoaderLimitError) as caught:
        load(b"x" * 11, "application/pdf", "a.pdf", LoaderLimits(max_bytes=10))
    assert caught.value.code == "file_too_large" and "11 bytes; at most 10" in str(caught.value)


def test_character_limit_on_any_kind():
    with pytest.raises(LoaderLimitError) as caught:
        load(b"<p>" + b"w" * 20 + b"</p>", "text/html", None, LoaderLimits(max_chars=10))
    assert caught.value.code == "text_too_long"


def test_limits_are_checked():
    with pytest.raises(ValueError, match="max_pages"):
        LoaderLimits(max_pages=0)


def test_parse_content_type():
    assert parse_content_type('Text/HTML; charset="latin-1"') == ("text/html", "latin-1")
    assert parse_content_type(None) == ("", None)
