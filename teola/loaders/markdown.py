"""Markdown: the text with its markup stripped, parsed by markdown-it-py (CommonMark plus tables).

Stripped rather than kept as source because a stored document is chunked and embedded: emphasis
marks, link targets and image paths cost tokens and pull embeddings toward URLs, while the words a
reader sees carry the meaning. What stays: headings, paragraphs, list items (``- `` or ``1. ``),
table rows (cells joined by `` | ``), code blocks as they are, link texts and image alt texts; raw
HTML blocks become their visible text. Nested list items are indented by two spaces a level."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.token import Token

import teola.loaders.html as html
from teola.loaders.errors import LoaderError
from teola.loaders.limits import LoaderLimits
from teola.loaders.text import decode

KIND = "Markdown"
_PARSER = MarkdownIt("commonmark").enable("table")
_INLINE_TEXT = {"text", "code_inline"}


def load(data: bytes, name: str, limits: LoaderLimits, charset: str | None = None) -> str:
    """The text of a Markdown file without its markup. LoaderError when none is left."""
    text = strip(decode(data, KIND, name, charset), name)
    if not text:
        raise LoaderError(
            "no_text",
            KIND,
            name,
            "no text once its markup is stripped (or block quotes and "
            f"lists nested deeper than {_PARSER.options['maxNesting']} levels, which the parser drops)",
        )
    return text


def strip(source: str, name: str = "markdown") -> str:
    """`source` as plain text: markup dropped, block structure kept as lines."""
    lines: list[str] = []
    markers: list[str] = []  # per open list item: its marker until its first line takes it, then ""
    cells: list[str] = []
    in_cell = False
    depth = 0  # of nested lists
    for token in _PARSER.parse(source):
        if token.type in ("th_open", "td_open", "th_close", "td_close"):
            in_cell = token.type.endswith("_open")
        elif token.type == "inline":
            text = _inline(token.children or [])
            if in_cell:
                cells.append(text)
            else:
                lines.append((markers[-1] if markers else "") + text)
                if markers:
                    markers[-1] = ""
        elif token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
            if depth == 0:
                _end_block(lines)
        elif token.type == "list_item_open":
            markers.append("  " * (depth - 1) + (f"{token.info}. " if token.info else "- "))
        elif token.type == "list_item_close":
            markers.pop()
        elif token.type in ("paragraph_close", "heading_close") and not token.hidden:
            _end_block(lines)
        elif token.type in ("fence", "code_block"):
            lines.append(token.content.rstrip("\n"))
            _end_block(lines)
        elif token.type == "html_block":
            lines.append(html.visible_text(token.content, name))
            _end_block(lines)
        elif token.type == "tr_close":
            lines.append(" | ".join(cells))
            cells = []
        elif token.type == "table_close":
            _end_block(lines)
    return "\n".join(lines).strip()


def _end_block(lines: list[str]) -> None:
    """One blank line after a block, however many blocks end together."""
    if lines and lines[-1]:
        lines.append("")


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
