"""The options of `python -m bench doc_qa` and the run's Settings read from them
(bench.studies.rag.doc_qa)."""

from __future__ import annotations

import argparse

from bench.studies.rag.doc_qa_systems import BASELINES, KEEP_EXPANSION, Settings


def add_load_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa` choosing the queries and the loads they run at."""
    p.add_argument(
        "--quick", action="store_true", help="naive RAG, small documents, 2 queries alone, one rate"
    )
    p.add_argument("--apps", default=None, help="comma-separated subset of naive_rag,advanced_rag")
    p.add_argument("--sizes", default=None, help="comma-separated subset of small,large")
    p.add_argument("--n-alone", type=int, default=None, help="queries run alone per system (default 3)")
    p.add_argument("--n-load", type=int, default=None, help="queries per Poisson rate (default 6)")
    p.add_argument(
        "--fractions",
        default=None,
        help="comma-separated rates as fractions of LlamaIndex's service rate (default 0.5,1,1.5,2)",
    )
    p.add_argument(
        "--rates",
        default=None,
        help="comma-separated absolute Poisson rates in q/s instead of --fractions (the same load for "
        "runs whose LlamaIndex service rate differs, e.g. with and without --no-core-lending)",
    )
    p.add_argument(
        "--trial",
        type=int,
        default=0,
        help="trial number k: the Poisson arrivals use seed + k, the queries stay the same; pool trials "
        "run separately with `python -m bench doc_qa_trials` (default 0)",
    )
    p.add_argument(
        "--alone-only",
        action="store_true",
        help="only the queries alone, no Poisson rates (work per query; for a machine too loaded to time)",
    )


def add_system_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa` choosing the systems and passes run side by side."""
    p.add_argument(
        "--no-same-mode", action="store_true", help="skip the table with both systems forced to refine"
    )
    p.add_argument(
        "--keep-expansion",
        action="store_true",
        help=f"also run {KEEP_EXPANSION!r} on advanced RAG: pass prune_covered_searches off, side by side",
    )
    p.add_argument(
        "--pass-off",
        default=None,
        help=f"with --keep-expansion: also run {KEEP_EXPANSION!r} with each of these comma-separated passes "
        "off, side by side (what the pass does at equal work)",
    )
    p.add_argument(
        "--only-same-mode", action="store_true", help="only the table with both systems forced to refine"
    )
    p.add_argument(
        "--embedding-batch",
        type=int,
        default=None,
        help="teola's embedder max efficient batch (default: the engine's shipped one; pages before "
        "commit 05f7204 ran 4, bench.studies.rag.rag's pre-tuned value for short passages)",
    )
    p.add_argument(
        "--baselines",
        default=None,
        help=f"comma-separated Teola-paper baselines to run beside teola and LlamaIndex on teola's runtime "
        f"(bench.studies.rag.rag's: {', '.join(BASELINES)}); default none",
    )
    p.add_argument(
        "--ungated",
        action="store_true",
        help="also run teola with pass prefill_split's gate off (every ready prompt prefix prefilled "
        "ahead, as before the gate), side by side: what the gate does",
    )


def add_setup_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa` choosing the data set, the page and how the engines run."""
    p.add_argument(
        "--data",
        choices=("narrativeqa", "pubmedqa"),
        default="narrativeqa",
        help="the gold-passage data set (bench.lib.workloads.GOLD_SETS); pubmedqa runs one size, "
        "'small': each abstract among 15 others (default narrativeqa)",
    )
    p.add_argument(
        "--out", default="doc_qa", help="results name: bench/results/rag/<out>.md/.json (default doc_qa)"
    )
    p.add_argument(
        "--remote-llm",
        action="store_true",
        help="the LLM behind a `vllm serve` process on loopback (engine kind openai) for both systems",
    )
    p.add_argument(
        "--langgraph",
        action="store_true",
        help="with --remote-llm: also run LangGraph (bench/baselines/langgraph_rag.py, ChatOpenAI on the "
        "same server) on the flows with compact synthesis (advanced RAG)",
    )
    p.add_argument(
        "--cross-encoder-shape",
        action="store_true",
        help="both systems rerank with a cross-encoder-shaped reranker (MiniLM weights, untrained head: "
        "a real cross-encoder's cost, no cosine ranking, so teola's defaults keep the expansion); "
        "its answers are not a quality measure",
    )
    p.add_argument(
        "--no-core-lending",
        action="store_true",
        help="the engines keep their home cores (share_cores off; engines/machine/core_share.py) for both "
        "systems",
    )


def positive_numbers(p: argparse.ArgumentParser, flag: str, text: str) -> tuple[float, ...]:
    """A comma-separated list of positive numbers, or a parser error naming `flag`."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        p.error(f"{flag} must be comma-separated numbers, got {text!r}")
    if not values or min(values) <= 0:
        p.error(f"{flag} must be positive numbers")
    return values


def settings_from(args: argparse.Namespace, p: argparse.ArgumentParser) -> Settings:
    """The run's Settings from its options (p.error names a wrong one)."""
    s = Settings.quick() if args.quick else Settings()
    s.data = args.data
    s.ungated = args.ungated
    if args.alone_only:
        s.fractions, s.rates = (), ()
    if s.data == "pubmedqa":
        s.sizes = {"small": 15}
    for name in ("n_alone", "n_load"):
        value = getattr(args, name)
        if value is not None:
            if value < 1:
                p.error(f"--{name.replace('_', '-')} must be >= 1")
            setattr(s, name, value)
    if args.fractions:
        s.fractions = positive_numbers(p, "--fractions", args.fractions)
    if args.rates:
        s.rates = positive_numbers(p, "--rates", args.rates)
    if args.trial < 0:
        p.error("--trial must be >= 0")
    s.trial = args.trial
    if args.no_same_mode:
        s.same_mode = None
    s.keep_expansion = args.keep_expansion
    if args.pass_off:
        from teola.passes.registry import pass_names

        s.passes_off = tuple(x.strip() for x in args.pass_off.split(",") if x.strip())
        unknown = sorted(set(s.passes_off) - set(pass_names()))
        if unknown or not s.keep_expansion:
            p.error(
                f"--pass-off needs --keep-expansion and known passes ({', '.join(pass_names())}); got "
                f"{args.pass_off!r}"
            )
    if args.baselines:
        s.baselines = tuple(b.strip() for b in args.baselines.split(",") if b.strip())
        unknown = sorted(set(s.baselines) - set(BASELINES))
        if unknown:
            p.error(f"unknown baseline(s) {unknown}; known: {', '.join(BASELINES)}")
    if args.embedding_batch is not None:
        if args.embedding_batch < 1:
            p.error("--embedding-batch must be >= 1")
        s.embedding_batch = args.embedding_batch
    if args.only_same_mode:
        s.apps, s.sizes = ("advanced_rag",), {}
    if args.apps:
        s.apps = tuple(a.strip() for a in args.apps.split(",") if a.strip())
        if set(s.apps) - {"naive_rag", "advanced_rag"}:
            p.error(f"unknown app(s) in {args.apps!r}; known: naive_rag, advanced_rag")
    if args.sizes:
        keep = [x.strip() for x in args.sizes.split(",") if x.strip()]
        if set(keep) - set(s.sizes):
            p.error(f"unknown size(s) in {args.sizes!r}; known: {', '.join(s.sizes)}")
        s.sizes = {k: v for k, v in s.sizes.items() if k in keep}
    return s
