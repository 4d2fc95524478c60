"""What the Ray executor hands engine actors from the driver's environment and an engine's options.

Ray keeps a job's `runtime_env` and every actor's constructor arguments in its GCS, where its job and
state APIs show them to anyone who can reach the cluster. So the job's `runtime_env` carries only the
settings engines need, by allow-list (`worker_env`), never a secret; and the secrets an engine needs
(the Postgres DSN with its password, a Hugging Face token, an API key) reach that engine's actor
alone, as arguments of an actor call (`secrets_for`), which Ray delivers to the actor and does not
store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Settings the engines read (offline flags, cache dirs, thread counts, vLLM's knobs, teola's cache
# and device choice). A name outside these is not forwarded; `forward_env` adds names.
FORWARD_NAMES = frozenset(
    {
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "HF_HOME",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "TRANSFORMERS_CACHE",
        "SENTENCE_TRANSFORMERS_HOME",
        "TORCH_HOME",
        "TOKENIZERS_PARALLELISM",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "TEOLA_CACHE_DIR",
        "TEOLA_DEVICE",
    }
)
FORWARD_PREFIXES = ("VLLM_",)
# Whatever the lists say, a name with a part that names a credential stays out of the runtime_env
# (VLLM_API_KEY has the vLLM prefix; TOKENIZERS_PARALLELISM is no token).
SECRET_PARTS = frozenset(
    {
        "SECRET",
        "SECRETS",
        "TOKEN",
        "TOKENS",
        "KEY",
        "KEYS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "DSN",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
    }
)

# The secret variables each engine kind reads in its actor, sent to its actors only.
SECRET_ENV: dict[str, tuple[str, ...]] = {
    "pgvector": ("TEOLA_PG_DSN",),
    "search": ("TEOLA_PG_DSN",),
    "vllm": ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"),
    "sentence_transformers": ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"),
    "reranker": ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"),
}
# Engine options that hold credentials (pgvector's and text search's `dsn`, the OpenAI engines' `api_key`).
SECRET_OPTIONS = frozenset({"dsn", "api_key"})


def is_secret_name(name: str) -> bool:
    return not SECRET_PARTS.isdisjoint(name.upper().split("_"))


def worker_env(environ: Mapping[str, str], extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The variables of `environ` that go into the job's runtime_env: the allow-list plus `extra`,
    never a secret-looking name."""
    return {
        k: v
        for k, v in environ.items()
        if (k in FORWARD_NAMES or k.startswith(FORWARD_PREFIXES) or k in extra) and not is_secret_name(k)
    }


def check_forward_env(names: Any) -> tuple[str, ...]:
    """The RayExecutor option `forward_env` checked: variable names, none of them a secret."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"RayExecutor: forward_env must be a list of variable names, got {names!r}")
    secret = [n for n in names if is_secret_name(n)]
    if secret:
        raise ValueError(
            f"RayExecutor: forward_env {secret} look like secrets, which Ray would store in its "
            "GCS; give them to the engines that need them with secret_env={kind or engine name: "
            "[names]} instead"
        )
    return tuple(names)


def check_secret_env(value: Any) -> dict[str, tuple[str, ...]]:
    """The RayExecutor option `secret_env` checked: {engine kind or name: [variable names]}."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, (list, tuple)) and all(isinstance(n, str) and n for n in v)
        for k, v in value.items()
    ):
        raise ValueError(
            "RayExecutor: secret_env must map an engine kind or name to a list of variable "
            f"names, e.g. {{'pgvector': ['TEOLA_PG_DSN']}}; got {value!r}"
        )
    return {k: tuple(v) for k, v in value.items()}


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(options for the actor's constructor, credential options sent with `secrets_for`)."""
    public = {k: v for k, v in options.items() if k not in SECRET_OPTIONS}
    return public, {k: v for k, v in options.items() if k in SECRET_OPTIONS}


def secrets_for(
    name: str,
    kind: str,
    environ: Mapping[str, str],
    extra: Mapping[str, tuple[str, ...]],
    options: dict[str, Any],
) -> dict[str, Any]:
    """What one engine's actor receives by actor call: {"env": the set secret variables its kind
    (and `extra` by kind or engine name) reads, "options": its credential options}."""
    names = (*SECRET_ENV.get(kind, ()), *extra.get(kind, ()), *extra.get(name, ()))
    return {"env": {n: environ[n] for n in names if n in environ}, "options": options}
