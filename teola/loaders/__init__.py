"""Loaders: the text of an uploaded file (PDF, HTML, Markdown, DOCX, plain text).

``load(data, content_type, filename)`` picks a loader by content type, else by extension
(teola.loaders.registry), within `LoaderLimits`; a file it cannot read raises a `LoaderError`
naming the file, its kind and the problem."""

from teola.loaders.errors import LoaderError, LoaderLimitError, UnsupportedFileType
from teola.loaders.limits import LoaderLimits
from teola.loaders.registry import BY_CONTENT_TYPE, BY_EXTENSION, SUPPORTED, load

__all__ = [
    "BY_CONTENT_TYPE",
    "BY_EXTENSION",
    "SUPPORTED",
    "LoaderError",
    "LoaderLimitError",
    "LoaderLimits",
    "UnsupportedFileType",
    "load",
]
