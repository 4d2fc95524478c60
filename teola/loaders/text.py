"""Plain text: bytes decoded as UTF-8 (or the charset the content type names)."""

from __future__ import annotations

import codecs

from teola.loaders.errors import LoaderError
from teola.loaders.limits import LoaderLimits

KIND = "text"


def decode(data: bytes, kind: str, name: str, charset: str | None = None) -> str:
    """`data` as a string: UTF-8 (a leading byte-order mark dropped) unless `charset` names
    another encoding. LoaderError ``not_text`` naming the first bad byte."""
    encoding = "utf-8-sig"
    if charset and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            raise LoaderError(
                "unknown_charset",
                kind,
                name,
                f"unknown charset {charset!r} in the content type; send UTF-8 (charset=utf-8)",
            ) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise LoaderError(
            "not_text",
            kind,
            name,
            f"byte {exc.start} ({data[exc.start : exc.start + 1]!r}) is not "
            f"valid {encoding.removesuffix('-sig').upper()}; send the text as UTF-8",
        ) from None


def load(data: bytes, name: str, limits: LoaderLimits, charset: str | None = None) -> str:
    """The text of a plain-text file."""
    return decode(data, KIND, name, charset)
