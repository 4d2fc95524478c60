"""Engines and runtime overheads: graph compilation time (compile), the runtime's scheduler overhead
and batching policies (runtime), prefix reuse TTFT (prefix_ttft), overlapped expansion and indexing
(overlap), the embedder's batch efficiency (embed_batch), vLLM process layout (engine_settings),
many concurrent queries over HTTP (load), the Ray executor (ray), the remote LLM path (remote_llm),
one tenant flooding another (tenants) and a hostile mix of requests against a served app (hostile).

Usage: python -m bench.overheads --study NAME [options]; `--study NAME --help` lists its options."""
from __future__ import annotations

import sys

from bench.common import run_study

STUDIES = {
    "compile": "compile",                  # compile + optimize time of one advanced-RAG query
    "runtime": "runtime_overhead",         # scheduler overhead and batching policies (test engines)
    "prefix_ttft": "prefix_ttft",          # time to first token with and without a partial prefill
    "overlap": "overlap",                  # expansion and indexing overlapped vs in turn
    "embed_batch": "embed_batch",          # the embedder's batch efficiency by chunk length
    "engine_settings": "engine_settings",  # vLLM process layout and thread placement
    "load": "load",                        # many concurrent queries over HTTP on loopback
    "ray": "ray_overhead",                 # per-primitive overhead of the Ray executor
    "remote_llm": "remote_overhead",       # per-call overhead of the LLM behind `vllm serve`
    "tenants": "tenant_flood",             # a flooding tenant and a steady one, per-tenant limits
    "hostile": "hostile_mix",              # hostile clients, a well-behaved tenant, /healthz and memory
}


def main(argv: list[str] | None = None) -> int:
    return run_study("overheads", STUDIES, argv, description=__doc__.split("\n\n")[0]) or 0


if __name__ == "__main__":
    sys.exit(main())
