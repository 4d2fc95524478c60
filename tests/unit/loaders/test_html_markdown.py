"""The HTML and Markdown loaders: visible text only, block structure kept as lines."""

from __future__ import annotations

import pytest

from teola.loaders import LoaderError, load

PAGE = b"""<!doctype html><html><head><title>T</title><style>p {color: red}</style>
<script>var hidden = 1;</script></head><body><h1>Eiffel Tower</h1>
<p>Built by <b>Gustave Eiffel</b>'s company.</p><ul><li>Paris</li><li>1889</li></ul></body></html>"""


def test_html_keeps_visible_text_only():
    text = load(PAGE, "text/html; charset=utf-8", "t.html")
    assert "Eiffel Tower" in text and "Built by Gustave Eiffel's company." in text
    assert "Paris" in text and "1889" in text
    assert "hidden" not in text and "color" not in text and "<" not in text


def test_html_honours_the_charset():
    assert load("<p>caf\u00e9</p>".encode("latin-1"), "text/html; charset=ISO-8859-1", None) == "caf\u00e9"


def test_html_not_utf8_is_named():
    with pytest.raises(LoaderError) as caught:
        load(b"<p>\xff\xfe</p>", "text/html", "x.html")
    assert (
        caught.value.code == "not_text"
        and "'x.html' (HTML)" in str(caught.value)
        and "UTF-8" in str(caught.value)
    )


MARKDOWN = """# Eiffel Tower

Built by *Gustave Eiffel*'s [company](https://example.com/eiffel).
![the tower at night](night.png)

- Paris
- 1889

1. first
2. second

| year | height |
|------|--------|
| 1889 | 300 m  |

```
code stays as it is
```

<div><p>inline <b>HTML</b> block</p></div>
"""


def test_markdown_markup_is_stripped():
    text = load(MARKDOWN.encode(), "text/markdown", "t.md")
    assert text.startswith("Eiffel Tower\n\nBuilt by Gustave Eiffel's company.\nthe tower at night")
    assert "- Paris\n- 1889" in text and "1. first\n2. second" in text
    assert (
        "year | height\n1889 | 300 m" in text
        and "code stays as it is" in text
        and "inline HTML block" in text
    )
    for markup in ("#", "*", "](", "https://", "night.png", "<div>", "|---"):
        assert markup not in text


def test_markdown_by_extension():
    assert load(b"**bold**", None, "notes.markdown") == "bold"


def test_markdown_nested_lists_are_indented_and_blocks_separated_once():
    assert (
        load(b"- one\n  - inner\n- two\n\nafter", "text/markdown", None) == "- one\n  - inner\n- two\n\nafter"
    )
    loose = b"- one\n- two\n\n  more of two\n\nafter"  # a blank line in an item: a paragraph per item
    assert load(loose, "text/markdown", None) == "- one\n\n- two\n\nmore of two\n\nafter"


@pytest.mark.parametrize(
    "body, ctype, kind",
    [
        (b"<html><script>only()</script></html>", "text/html", "(HTML)"),
        (b"<div>" * 300 + b"lost" + b"</div>" * 300, "text/html", "(HTML)"),
        (b"![](picture.png)", "text/markdown", "(Markdown)"),
    ],
)
def test_no_text_is_named(body, ctype, kind):
    with pytest.raises(LoaderError) as caught:
        load(body, ctype, "f")
    assert caught.value.code == "no_text" and kind in str(caught.value)
