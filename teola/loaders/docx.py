"""DOCX (Word): paragraphs and table rows of the body in document order, read with python-docx."""

from __future__ import annotations

import io
import zipfile

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table

from teola.loaders.errors import LoaderError, LoaderLimitError
from teola.loaders.limits import LoaderLimits

KIND = "DOCX"
CHUNK = 1024 * 1024  # bytes unpacked at a time while checking a package


def load(data: bytes, name: str, limits: LoaderLimits, charset: str | None = None) -> str:
    """The text of a Word document: one line per paragraph, table cells joined by `` | ``.
    LoaderError for a file that is not a DOCX or is corrupt, or that holds no text;
    LoaderLimitError when its parts unpack past ``limits.max_unpacked_bytes``."""
    _check_zip(data, name, limits)
    try:
        document = docx.Document(io.BytesIO(data))
        lines = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                lines.extend(" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows)
            else:
                lines.append(block.text)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise LoaderError(
            "corrupt_file",
            KIND,
            name,
            f"not a readable Word document ({type(exc).__name__}: "
            f"{str(exc)[:200]}); save it again as .docx (Word 2007 or later)",
        ) from None
    except Exception as exc:  # lxml's XML errors inside a damaged package
        raise LoaderError(
            "corrupt_file",
            KIND,
            name,
            f"damaged ({type(exc).__name__}: {str(exc)[:200]}); save it again as .docx",
        ) from None
    text = "\n".join(line.rstrip() for line in lines).strip()
    if not text:
        raise LoaderError(
            "no_text", KIND, name, "no text in its body (only images or empty); upload a document with text"
        )
    return text


def _check_zip(data: bytes, name: str, limits: LoaderLimits) -> None:
    try:
        package = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        hint = (
            " (it looks like an old binary .doc: save it as .docx)" if data[:4] == b"\xd0\xcf\x11\xe0" else ""
        )
        raise LoaderError("corrupt_file", KIND, name, f"not a DOCX: not a zip package{hint}") from None
    with package:
        parts = package.infolist()
        unpacked = sum(info.file_size for info in parts)
        if unpacked > limits.max_unpacked_bytes:
            raise LoaderLimitError(
                "file_too_large",
                KIND,
                name,
                f"its parts unpack to {unpacked} bytes; at most "
                f"{limits.max_unpacked_bytes}: a zip bomb, or a document to split",
                limit="max_unpacked_bytes",
            )
        try:
            for info in parts:
                _verify(package, info)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            # zlib errors, bad CRCs, encrypted parts
            raise LoaderError(
                "corrupt_file",
                KIND,
                name,
                f"a damaged zip package ({type(exc).__name__}: {str(exc)[:200]}); save it again as .docx",
            ) from None


def _verify(package: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    """Unpack one part in bounded chunks. A part that unpacks to more than its header declares fails
    its CRC (BadZipFile) here, before python-docx reads it whole in one call, whose output only the
    declared size would bound after the fact."""
    with package.open(info) as part:
        while part.read(CHUNK):
            pass
