"""The errors of the loaders: each names the file, its kind and the problem, and says what to do."""

from __future__ import annotations


class LoaderError(ValueError):
    """A file that cannot be turned into text: encrypted, corrupt, not of its declared kind, or
    holding no text. `code` is a short machine name of the problem (``"encrypted_pdf"``,
    ``"corrupt_file"``, ``"no_text"``, ...); the message names the file, its kind and the fix."""

    def __init__(self, code: str, kind: str, name: str, problem: str) -> None:
        super().__init__(f"{name} ({kind}): {problem}")
        self.code = code
        self.kind = kind
        self.name = name


class LoaderLimitError(LoaderError):
    """A file over one of the `LoaderLimits` (input bytes, PDF pages, extracted characters);
    `limit` names the field of `LoaderLimits` it passed, so a caller can name its own setting."""

    def __init__(self, code: str, kind: str, name: str, problem: str, *, limit: str) -> None:
        super().__init__(code, kind, name, problem)
        self.limit = limit


class UnsupportedFileType(LoaderError):
    """A file whose content type and extension match no loader."""
