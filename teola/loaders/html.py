"""HTML: the text a browser would show, laid out by inscriptis (tables, lists and blocks kept as
lines; scripts, styles and markup dropped)."""

from __future__ import annotations

from inscriptis import get_text

from teola.loaders.errors import LoaderError
from teola.loaders.limits import LoaderLimits
from teola.loaders.text import decode

KIND = "HTML"


def load(data: bytes, name: str, limits: LoaderLimits, charset: str | None = None) -> str:
    """The visible text of an HTML page (UTF-8 unless `charset` says otherwise). LoaderError when
    it cannot be parsed or shows no text."""
    text = visible_text(decode(data, KIND, name, charset), name)
    if not text:
        # libxml2 drops elements nested deeper than 255 levels without an error
        raise LoaderError(
            "no_text",
            KIND,
            name,
            "no visible text (only markup, scripts or styles, or elements "
            "nested deeper than 255 levels, which the parser drops)",
        )
    return text


def visible_text(source: str, name: str) -> str:
    """The visible text of HTML source, trailing spaces of each line dropped; may be empty."""
    try:
        text = get_text(source)
    except RecursionError:
        raise LoaderError(
            "corrupt_file", KIND, name, "nested too deeply to lay out; flatten the page"
        ) from None
    except Exception as exc:  # lxml's parser errors
        raise LoaderError(
            "corrupt_file", KIND, name, f"cannot be parsed ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()
