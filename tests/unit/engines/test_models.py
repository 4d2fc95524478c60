"""Model registry: resolution, clear errors, cache location."""

from pathlib import Path

import pytest

from engines.assets import models, paths


def test_existing_folder_is_used_as_is(tmp_path):
    assert models.resolve_model(tmp_path) == tmp_path.resolve()
    assert models.resolve_model(str(tmp_path)) == tmp_path.resolve()


def test_unknown_name_lists_known_names_and_the_fix():
    with pytest.raises(ValueError) as err:
        models.resolve_model("gpt-17")
    msg = str(err.value)
    assert "smollm2-135m-instruct" in msg and "all-minilm-l6-v2" in msg and "local" in msg


def test_missing_folder_path_is_reported_as_a_path(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        models.resolve_model(str(tmp_path / "nope"))


@pytest.mark.parametrize("bad", ["", None, 3])
def test_non_string_model_is_rejected(bad):
    with pytest.raises(ValueError, match="model"):
        models.resolve_model(bad)


def test_cache_dir_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("TEOLA_CACHE_DIR", str(tmp_path / "c"))
    assert paths.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    assert paths.models_dir() == tmp_path / "c" / "models"


def test_cache_dir_defaults_to_the_checkout(monkeypatch):
    monkeypatch.delenv("TEOLA_CACHE_DIR", raising=False)
    root = Path(__file__).resolve().parents[3]
    assert paths.source_root() == root
    assert paths.cache_dir() == root / ".cache"


def test_unprepared_model_says_to_run_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("TEOLA_CACHE_DIR", str(tmp_path))
    assert not models.is_prepared("smollm2-135m-instruct")
    with pytest.raises(ValueError, match="teola setup"):
        models.resolve_model("smollm2-135m-instruct")


def test_prepared_smollm2_folder_is_complete():
    """After `teola setup` (run by scripts/setup.sh) the converted folder has what vLLM needs."""
    import json

    folder = models.resolve_model("smollm2-135m-instruct", prepare=True, progress=lambda _: None)
    config = json.loads((folder / "config.json").read_text())
    assert config["rope_theta"] > 0 and config["torch_dtype"] == "bfloat16"
    assert "quantization_config" not in config
    assert "chat_template" in json.loads((folder / "tokenizer_config.json").read_text())
    assert models.is_prepared("smollm2-135m-instruct")


def test_doctor_reports_every_check_with_a_message():
    checks = models.doctor()
    names = [name for name, _, _ in checks]
    assert "import vllm" in names and "model smollm2-135m-instruct" in names
    assert all(isinstance(ok, bool) and msg for _, ok, msg in checks)
    assert all(ok for _, ok, _ in checks), [c for c in checks if not c[1]]
