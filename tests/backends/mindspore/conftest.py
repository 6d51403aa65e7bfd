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
