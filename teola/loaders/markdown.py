"""Markdown: the text with its markup stripped, parsed by markdown-it-py (CommonMark plus tables).

Stripped rather than kept as source because a stored document is chunked and embedded: emphasis
marks, link targets and image paths cost tokens and pull embeddings toward URLs, while the words a
reader sees carry the meaning. What stays: headings, paragraphs, list items (``- `` or ``1. ``),
table rows (cells joined by `` | ``), code blocks as they are, link texts and image alt texts; raw
HTML blocks become their visible text."""
from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.token import Token

from teola.loaders import html
from teola.loaders.limits import LoaderLimits
from teola.loaders.text import decode

KIND = "Markdown"
_PARSER = MarkdownIt("commonmark").enable("table")
_INLINE_TEXT = {"text", "code_inline"}


def load(data: bytes, name: str, limits: LoaderLimits, charset: str | None = None) -> str:
    """The text of a Markdown file without its markup."""
    source = decode(data, KIND, name, charset)
    return strip(source, name, limits)


def strip(source: str, name: str = "markdown", limits: LoaderLimits | None = None) -> str:
    """`source` as plain text: markup dropped, block structure kept as lines."""
    lines: list[str] = []
    prefixes: list[str] = []  # list-item markers waiting for the item's first line
    cells: list[str] = []
    in_cell = False
    for token in _PARSER.parse(source):
        if token.type in ("th_open", "td_open", "th_close", "td_close"):
            in_cell = token.type.endswith("_open")
        elif token.type == "inline":
            text = _inline(token.children or [])
            if in_cell:
                cells.append(text)
            else:
                lines.append((prefixes.pop() if prefixes else "") + text)
        elif token.type == "list_item_open":
            prefixes.append(f"{token.info}. " if token.info else "- ")
        elif token.type in ("paragraph_close", "heading_close") and not token.hidden:
            lines.append("")
        elif token.type in ("fence", "code_block"):
            lines.extend([token.content.rstrip("\n"), ""])
        elif token.type == "html_block":
            lines.extend([html.load(token.content.encode("utf-8"), name, limits or LoaderLimits()), ""])
        elif token.type == "tr_close":
            lines.append(" | ".join(cells))
            cells = []
        elif token.type in ("table_close", "bullet_list_close", "ordered_list_close") and token.level == 0:
            lines.append("")
    return "\n".join(lines).strip()


def _inline(children: list[Token]) -> str:
    parts = []
    for child in children:
        if child.type in _INLINE_TEXT:
            parts.append(child.content)
        elif child.type == "image":
            parts.append(child.content)  # its alt text
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return "".join(parts)
