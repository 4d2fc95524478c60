"""`teola emulate`: an emulated GPU vLLM server (registered by teola.cli).

teola emulate --profile a100-llama3.1-8b-measured [--instances N] [--port 8000]
              [--model smollm2-135m-instruct | DIR] [--served-model-name NAME]
              [--output sample|echo] [--output-len SPEC] [--seed S] [--max-model-len N]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engines.sim.profile import profile_names
from teola.emulate.lengths import SPEC_HELP
from teola.emulate.settings import DEFAULT_MODEL, EmulatorSettings


class EmulateCliError(Exception):
    """A usage mistake: printed by teola.cli as an error with exit code 2."""


def _say(message: str) -> None:
    print(f"[teola] {message}", file=sys.stderr, flush=True)


def cmd_emulate(args: argparse.Namespace) -> int:
    """Serve the emulated vLLM API until interrupted; on exit, report the CPU time per request."""
    import uvicorn

    from engines.assets.paths import configure_engine_env
    from teola.emulate.server import create_emulator

    configure_engine_env()  # the tokenizer loads offline, from the local model folder
    try:
        settings = EmulatorSettings(
            args.profile,
            args.instances,
            args.model,
            args.served_model_name,
            args.output,
            args.output_len,
            args.seed,
            args.max_model_len,
        )
        app = create_emulator(settings, on_stop=_report)
    except ValueError as exc:
        raise EmulateCliError(str(exc)) from None
    emulator = app.state.emulator
    _say(
        f"emulating vLLM on profile {emulator.pool.name!r} ({args.instances} engine(s), tokenizer "
        f"{emulator.tokens.path.name}, model name {settings.names[0]!r}) at http://{args.host}:{args.port}"
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.access_log)
    return 0


def _report(emulator: Any) -> None:
    served, cpu = emulator.served(), emulator.cpu_seconds()
    per = f", {1000 * cpu / served:.2f} ms per request" if served else ""
    _say(f"served {served} request(s); process CPU {cpu:.2f} s{per}")


def add_commands(sub: Any) -> None:
    """Register `emulate` on teola's sub-command parser."""
    sp = sub.add_parser(
        "emulate", help="serve vLLM's OpenAI API on simulated GPU engines (wall-clock timing)"
    )
    sp.add_argument(
        "--profile",
        required=True,
        help=f"a simulation profile file, or a shipped one ({', '.join(profile_names())})",
    )
    sp.add_argument(
        "--instances",
        type=int,
        default=1,
        help="simulated engines behind the one port; each request goes to the least loaded (default 1)",
    )
    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--port", type=int, default=8000)
    sp.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"whose tokenizer counts the tokens: a teola model name or a local folder "
        f"(default {DEFAULT_MODEL})",
    )
    sp.add_argument("--served-model-name", help="the model name clients send (default: --model as given)")
    sp.add_argument(
        "--output",
        choices=("sample", "echo"),
        default="sample",
        help="without ignore_eos: lengths from --output-len (sample), or the prompt's tokens (echo)",
    )
    sp.add_argument(
        "--output-len", default="max", help=f"output length distribution: {SPEC_HELP} (default max)"
    )
    sp.add_argument("--seed", type=int, default=0, help="seed of the output lengths (default 0)")
    sp.add_argument("--max-model-len", type=int, help="context length (default: the profile's)")
    sp.add_argument(
        "--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug")
    )
    sp.add_argument("--access-log", action="store_true", help="log every request (costs CPU)")
    sp.set_defaults(handler=cmd_emulate)
