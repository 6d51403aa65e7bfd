import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The built-in tiny model, built once per test session into a temporary cache."""
    from mindrl.models.tiny import resolve_model_path

    return resolve_model_path("builtin:tiny", cache_dir=str(tmp_path_factory.mktemp("models")))
