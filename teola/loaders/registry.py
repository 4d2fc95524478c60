"""Which loader reads a file: by its content type, else by its file name's extension."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

import teola.loaders.docx as docx
import teola.loaders.html as html
import teola.loaders.markdown as markdown
import teola.loaders.pdf as pdf
import teola.loaders.text as text
from teola.loaders.errors import LoaderError, LoaderLimitError, UnsupportedFileType
from teola.loaders.limits import LoaderLimits

Loader = Callable[[bytes, str, LoaderLimits, str | None], str]

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
BY_CONTENT_TYPE: dict[str, Loader] = {
    "application/pdf": pdf.load,
    "application/x-pdf": pdf.load,
    "text/html": html.load,
    "application/xhtml+xml": html.load,
    "text/markdown": markdown.load,
    "text/x-markdown": markdown.load,
    DOCX_TYPE: docx.load,
    "text/plain": text.load,
}
BY_EXTENSION: dict[str, Loader] = {
    ".pdf": pdf.load,
    ".html": html.load,
    ".htm": html.load,
    ".xhtml": html.load,
    ".md": markdown.load,
    ".markdown": markdown.load,
    ".docx": docx.load,
    ".txt": text.load,
    ".text": text.load,
}
# What clients send when they do not know a file's type: the extension decides then.
GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
SUPPORTED = (
    "application/pdf (.pdf), text/html (.html, .htm), text/markdown (.md), "
    f"{DOCX_TYPE} (.docx) and text/plain (.txt)"
)


def load(
    data: bytes, content_type: str | None, filename: str | None, limits: LoaderLimits | None = None
) -> str:
    """The text of one file. The loader is chosen by `content_type` (its parameters, such as
    ``charset``, are honoured); when that is missing or generic (application/octet-stream), by the
    extension of `filename`; any other ``text/*`` type is read as plain text.

    Raises UnsupportedFileType (no loader fits), LoaderLimitError (over a limit) or LoaderError (the
    file cannot be read), each naming the file, its kind and the problem."""
    limits = limits or LoaderLimits()
    mime, charset = parse_content_type(content_type)
    name = repr(filename) if filename else "the uploaded file"
    kind = mime or "no content type"
    if len(data) > limits.max_bytes:
        raise LoaderLimitError(
            "file_too_large", kind, name, f"{len(data)} bytes; at most {limits.max_bytes}", limit="max_bytes"
        )
    loader, guessed = loader_for(mime, filename)
    if loader is None:
        raise UnsupportedFileType(
            "unsupported_media_type", kind, name, f"no loader for this type; supported: {SUPPORTED}"
        )
    try:
        result = loader(data, name, limits, charset)
    except LoaderError as exc:
        if guessed and exc.code == "not_text":
            raise UnsupportedFileType(
                "unsupported_media_type",
                kind,
                name,
                f"neither UTF-8 text nor a supported type; supported: {SUPPORTED}",
            ) from None
        raise
    if len(result) > limits.max_chars:
        raise LoaderLimitError(
            "text_too_long",
            kind,
            name,
            f"{len(result)} characters of text; at most {limits.max_chars}; split the file",
            limit="max_chars",
        )
    return result


def loader_for(mime: str, filename: str | None) -> tuple[Loader | None, bool]:
    """The loader of a (lower-case, parameter-free) content type and file name, and whether it was
    only guessed (a generic type and no known extension: read as text if it decodes)."""
    if mime in BY_CONTENT_TYPE:
        return BY_CONTENT_TYPE[mime], False
    if mime in GENERIC_TYPES:
        suffix = PurePosixPath(filename or "").suffix.lower()
        if suffix in BY_EXTENSION:
            return BY_EXTENSION[suffix], False
        return text.load, True
    if mime.startswith("text/"):
        return text.load, False
    return None, False


def parse_content_type(content_type: str | None) -> tuple[str, str | None]:
    """``"Text/HTML; charset=latin-1"`` -> ``("text/html", "latin-1")``."""
    mime, _, params = (content_type or "").partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or None
    return mime.strip().lower(), charset
