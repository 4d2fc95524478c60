"""How much one file may hold before a loader refuses it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoaderLimits:
    """Limits on one file.

    max_bytes: largest file read, in bytes (checked before parsing).
    max_pages: most pages of a PDF (checked before any page is read).
    max_chars: most characters of extracted text (extraction stops as soon as it is passed).
    max_unpacked_bytes: most bytes the parts of a DOCX (a zip) may add up to once unpacked, as
        their headers declare them: a guard against zip bombs (python-docx holds every part in memory;
        ordinary documents unpack to 5-30 times their size).
    """

    max_bytes: int = 16 * 1024 * 1024
    max_pages: int = 500
    max_chars: int = 1_000_000
    max_unpacked_bytes: int = 128 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_pages", "max_chars", "max_unpacked_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LoaderLimits.{name} must be an int >= 1, got {value!r}")
