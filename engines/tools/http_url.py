"""The URL of one HTTP tool call: the tool's URL template filled from the call's arguments.

The template is the operator's and the arguments come from a model a tenant prompts, so an argument
can only fill its own placeholder:
- a path placeholder is percent-encoded as part of one segment (`/` included), and a segment that
  would come out as "", "." or ".." is refused (the path cannot climb to another resource);
- a query placeholder is percent-encoded as one value;
- the query parameters written in the template are fixed: an argument of the same name is refused
  instead of replacing them (`?api_key=...&scope=read` stays as written);
- the remaining arguments are returned for the caller to send as query parameters or a JSON body.
"""

from __future__ import annotations

import string
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit


def placeholders(text: str) -> list[str]:
    """The `{name}` placeholders of a template, in order."""
    return [f for _, f, _, _ in string.Formatter().parse(text) if f]


def fixed_params(url: str) -> set[str]:
    """The names of the query parameters written in a URL template."""
    return {k for k, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)}


def call_url(template: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the URL to call, the arguments no placeholder took); ValueError naming the argument when one
    is missing, would make a path segment "", "." or "..", or would replace a fixed query parameter."""
    fields = set(placeholders(template))
    missing = sorted(fields - set(args))
    if missing:
        raise ValueError(f"missing argument(s) for the URL: {', '.join(missing)}")
    quoted = {k: quote(str(args[k]), safe="") for k in fields}
    parts = urlsplit(template)
    path = "/".join(_segment(seg, quoted, args) for seg in parts.path.split("/"))
    query, fragment = parts.query.format(**quoted), parts.fragment.format(**quoted)
    rest = {k: v for k, v in args.items() if k not in fields}
    clash = sorted(set(rest) & fixed_params(template))
    if clash:
        raise ValueError(
            f"argument(s) {', '.join(map(repr, clash))} set a query parameter the tool's URL fixes; "
            "leave them out"
        )
    return urlunsplit((parts.scheme, parts.netloc, path, query, fragment)), rest


def _segment(template: str, quoted: dict[str, str], args: dict[str, Any]) -> str:
    names = placeholders(template)
    if not names:
        return template
    segment = template.format(**quoted)
    if segment in ("", ".", ".."):
        shown = ", ".join(f"{n}={args[n]!r}" for n in names)
        raise ValueError(
            f"argument(s) {shown} would make a URL path segment {segment!r}; a path argument cannot "
            "be empty, '.' or '..'"
        )
    return segment
