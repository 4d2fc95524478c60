"""PDF: the text of each page, extracted with pypdf, pages separated by a blank line."""

from __future__ import annotations

import io
import logging

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from teola.loaders.errors import LoaderError, LoaderLimitError
from teola.loaders.limits import LoaderLimits

KIND = "PDF"
HEADER_WINDOW = 1024  # bytes a "%PDF-" header may follow, as readers tolerate


def load(data: bytes, name: str, limits: LoaderLimits, charset: str | None = None) -> str:
    """The text of a PDF. LoaderError for a file that is not a PDF, is corrupt, is encrypted with a
    password, or has no text layer (a scan); LoaderLimitError past `limits.max_pages` pages or
    `limits.max_chars` characters."""
    if b"%PDF-" not in data[:HEADER_WINDOW]:
        raise LoaderError(
            "not_a_pdf",
            KIND,
            name,
            "not a PDF (no %PDF- header in its first "
            f"{HEADER_WINDOW} bytes); check the file and its content type",
        )
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # pypdf warns on every repairable flaw
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        _decrypt(reader, name)
        count = len(reader.pages)
    except LoaderError:
        raise
    except Exception as exc:  # pypdf raises many kinds on malformed input, not only PdfReadError
        raise _corrupt(name, exc) from None
    if count > limits.max_pages:
        raise LoaderLimitError(
            "too_many_pages",
            KIND,
            name,
            f"{count} pages; at most {limits.max_pages}; split the file",
            limit="max_pages",
        )
    pages: list[str] = []
    size = 0
    for number, page in enumerate(reader.pages, start=1):
        try:
            text = (page.extract_text() or "").strip()
        except Exception as exc:
            raise _corrupt(name, exc, f"page {number}") from None
        size += len(text) + 2
        if size > limits.max_chars:
            raise LoaderLimitError(
                "text_too_long",
                KIND,
                name,
                f"its text passes {limits.max_chars} characters by page {number} of {count}; split the file",
                limit="max_chars",
            )
        if text:
            pages.append(text)
    if not pages:
        raise LoaderError(
            "no_text",
            KIND,
            name,
            f"no text could be extracted from its {count} page(s): it is "
            "probably scanned images without a text layer; run OCR on it first (for example "
            "ocrmypdf) and upload the result",
        )
    return "\n\n".join(pages)


def _decrypt(reader: PdfReader, name: str) -> None:
    if not reader.is_encrypted:
        return
    try:  # many PDFs are encrypted only against editing, with an empty password to open them
        opened = reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except (DependencyError, FileNotDecryptedError, NotImplementedError):
        opened = False
    if not opened:
        raise LoaderError(
            "encrypted_pdf",
            KIND,
            name,
            "encrypted with a password; remove the password (for example qpdf --decrypt) and upload it again",
        )


def _corrupt(name: str, exc: Exception, where: str = "") -> LoaderError:
    reason = str(exc) or type(exc).__name__
    if not isinstance(exc, PdfReadError):
        reason = f"{type(exc).__name__}: {reason}"
    at = f" at {where}" if where else ""
    return LoaderError(
        "corrupt_file",
        KIND,
        name,
        f"cannot be read{at} ({reason[:200]}); the file is damaged or truncated: export it again",
    )
