"""PyTorch backend (transformers models). Importing this package registers ``"torch"`` in
:data:`mindrl.backends.base.BACKENDS`; it imports torch and transformers."""

from mindrl.backends.schedule import lr_factor  # noqa: F401
from mindrl.backends.torch.backend import TorchBackend  # noqa: F401
