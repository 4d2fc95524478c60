"""What the `teola` commands that talk to a running server share (`ingest`, `documents`,
`query --stream`): the --url and --api-key options, a `teola.client.Client` made from them, the
client's errors turned into one-line command errors, and the streamed query."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from teola.cli_logging import terminal_out
from teola.client import APIConnectionError, APIError, Client, TeolaError, events
from teola.trace.table import timing_table


class RemoteCliError(Exception):
    """A failure of a command talking to a server: printed as `teola: error: <message>`; exit code
    `code` (1 failed, 2 bad usage)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def add_server_options(sp: argparse.ArgumentParser) -> None:
    """--url and --api-key, defaulting to $TEOLA_URL and $TEOLA_API_KEY as the client does."""
    sp.add_argument(
        "--url", default=None, help="the server (default: $TEOLA_URL, else http://127.0.0.1:8000)"
    )
    sp.add_argument("--api-key", default=None, help="bearer key (default: $TEOLA_API_KEY)")


def client_from(args: argparse.Namespace) -> Client:
    """A blocking client of the server named by `args.url` and `args.api_key`."""
    return Client(args.url, args.api_key)


@contextmanager
def server_errors(what: str, client: Client) -> Iterator[None]:
    """Turn the client's exceptions inside the block into a RemoteCliError naming `what` failed."""
    try:
        yield
    except APIConnectionError as exc:
        raise RemoteCliError(
            f"{what}: cannot reach the server at {client.base_url} ({exc}); start one with "
            "`teola serve APP`, or pass --url"
        ) from None
    except APIError as exc:
        raise RemoteCliError(f"{what} failed with HTTP {exc.status} ({exc.code}): {exc.message}") from None
    except TeolaError as exc:
        raise RemoteCliError(f"{what} failed: {exc}") from None


def stream_query(args: argparse.Namespace, query: Mapping[str, Any], config: Mapping[str, Any]) -> int:
    """`teola query --stream`: print the answer's tokens as they arrive, then its timing table. An
    answer that came without tokens (a non-LLM last step) is printed whole when it arrives."""
    if args.json:
        raise RemoteCliError(
            "--stream prints the answer as it comes and --json one JSON body at the end; choose one", 2
        )
    out = terminal_out()
    with client_from(args) as client, server_errors(f"query of app {args.app!r}", client):
        with client.stream(args.app, dict(query), dict(config)) as stream:
            for event in stream:
                if isinstance(event, events.Token):
                    print(event.text, end="", file=out, flush=True)
                elif isinstance(event, events.Answer) and not stream.text:
                    whole = (
                        event.text
                        if event.text is not None
                        else json.dumps(event.output, indent=2, default=str)
                    )
                    print(whole, end="", file=out, flush=True)
            result = stream.result()
    print(f"\n\nquery {result.query_id}  latency {1000 * result.latency:.0f} ms\n", file=out)
    print(timing_table(result.trace), file=out, flush=True)
    return 0
