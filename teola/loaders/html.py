"""HTML: the text a browser would show, laid out by inscriptis (tables, lists and blocks kept as
lines; scripts, styles and markup dropped)."""
from __future__ import annotations

from inscriptis import get_text

from teola.loaders.errors import LoaderError
from teola.loaders.limits import LoaderLimits
from teola.loaders.text import decode

KIND = "HTML"


def load(data: bytes, name: str, limits: LoaderLimits, charset: str | None = None) -> str:
    """The visible text of an HTML page (UTF-8 unless `charset` says otherwise)."""
    source = decode(data, KIND, name, charset)
    try:
        text = get_text(source)
    except RecursionError:
        raise LoaderError("corrupt_file", KIND, name, "nested too deeply to lay out; flatten the page") from None
    except Exception as exc:  # lxml's parser errors
        raise LoaderError("corrupt_file", KIND, name, f"cannot be parsed ({type(exc).__name__}: "
                          f"{str(exc)[:200]})") from None
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()
