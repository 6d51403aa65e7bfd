"""Model helpers shared by the backends: the embedded tiny model and model-directory checks."""

from mindrl.models.tiny import (build_tiny_model, check_model_dir,  # noqa: F401
                                resolve_model_path)
