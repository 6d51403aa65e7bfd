"""Fixtures for the MindSpore backend tests: tiny random Qwen2 checkpoints (no tokenizer) and a
temporary working directory (MindSpore writes rank_*/ *.ir litter into the cwd on errors)."""


import pytest

pytest.importorskip("mindspore")
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from ms_helpers import make_hf_model  # noqa: E402


@pytest.fixture(scope="session")
def hf_tied(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen2_tied")
    return str(d), make_hf_model(d, tie=True)


@pytest.fixture(scope="session")
def hf_untied(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen2_untied")
    return str(d), make_hf_model(d, tie=False, seed=1)


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """builtin:tiny (tokenizer + weights): both backends load it, so the torch backend's own
    steps can be the reference."""
    import os

    from mindrl.models.tiny import resolve_model_path

    cache = os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")
    return resolve_model_path("builtin:tiny", cache_dir=cache)
