"""Model helpers shared by the backends: the embedded tiny model and model-directory checks."""

from mindrl.models.tiny import build_tiny_model, check_model_dir, resolve_model_path  # noqa: F401
