"""`teola documents list|delete --app A`: the caller's uploaded documents of an app on a server."""

from __future__ import annotations

import argparse
import json
from typing import Any

from teola.cli_logging import terminal_err, terminal_out
from teola.cli_remote import RemoteCliError, add_server_options, client_from, server_errors
from teola.client import Client, Document, NotFoundError


def cmd_list(args: argparse.Namespace) -> int:
    """Print the documents (of --namespace, if given) as a table, or as JSON with --json."""
    with client_from(args) as client, server_errors(f"listing the documents of app {args.app!r}", client):
        docs = _documents(client, args)
    out = terminal_out()
    if args.json:
        rows = [
            {
                "id": d.id,
                "bytes": d.bytes,
                "created": d.created.isoformat(),
                "sha256": d.sha256,
                "name": d.name,
                "namespace": d.namespace,
            }
            for d in docs
        ]
        print(json.dumps(rows, indent=2), file=out, flush=True)
        return 0
    table = [("id", "bytes", "created", "namespace", "name")]
    table += [
        (d.id, str(d.bytes), d.created.strftime("%Y-%m-%d %H:%M:%S"), d.namespace or "-", d.name or "-")
        for d in docs
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1], file=out)
    print(f"{len(docs)} document(s), {sum(d.bytes for d in docs)} bytes of text", file=out, flush=True)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete the given ids, or with --all every document (of --namespace, if given); exit code 1
    when an id is unknown (the others are still deleted)."""
    if bool(args.ids) == args.all:
        raise RemoteCliError("give document ids or --all (not both)", 2)
    if args.namespace and not args.all:
        raise RemoteCliError("--namespace selects documents for --all; with ids, leave it out", 2)
    unknown = []
    with client_from(args) as client, server_errors(f"deleting documents of app {args.app!r}", client):
        ids = [d.id for d in _documents(client, args)] if args.all else args.ids
        for doc_id in ids:
            try:
                client.delete_document(args.app, doc_id)
            except NotFoundError:
                unknown.append(doc_id)
    for doc_id in unknown:
        print(f"teola: unknown document id {doc_id!r} for app {args.app!r}", file=terminal_err(), flush=True)
    print(f"deleted {len(ids) - len(unknown)} document(s)", file=terminal_out(), flush=True)
    return 1 if unknown else 0


def _documents(client: Client, args: argparse.Namespace) -> list[Document]:
    docs = client.iter_documents(args.app, page_size=1000)
    return [d for d in docs if args.namespace is None or d.namespace == args.namespace]


def add_commands(sub: Any) -> None:
    """Add `documents list` and `documents delete` to the `teola` parser's subcommands."""
    docs = sub.add_parser("documents", help="list or delete an app's uploaded documents on a server")
    actions = docs.add_subparsers(dest="action", metavar="ACTION", required=True)
    sp = actions.add_parser(
        "list", help="the documents: id, size of their text, upload time, namespace, name"
    )
    sp.add_argument("--json", action="store_true", help="print them as JSON (with their sha256)")
    sp.set_defaults(handler=cmd_list)
    sp = actions.add_parser("delete", help="delete documents by id, or all of them")
    sp.add_argument("ids", nargs="*", metavar="ID", help="document ids (from `teola documents list`)")
    sp.add_argument("--all", action="store_true", help="delete every document (of --namespace, if given)")
    sp.set_defaults(handler=cmd_delete)
    for sp in actions.choices.values():
        sp.add_argument("--app", required=True, help="the app on the server")
        sp.add_argument("--namespace", default=None, help="only the documents ingested with this label")
        add_server_options(sp)
