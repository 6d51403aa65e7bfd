"""Fixtures for the model-builder tests: the tiny model built once per session."""

import os

import pytest


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    from mindrl.models.tiny import resolve_model_path

    cache = os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")
    return resolve_model_path("builtin:tiny", cache_dir=cache)
