"""MindSpore backend (Qwen2 / Qwen3 / Llama decoder Cells, compiled steps, msrun data parallel).
Importing this package imports mindspore and registers ``"mindspore"`` in
:data:`mindrl.backends.base.BACKENDS`."""

from mindrl.backends.mindspore.backend import MindSporeBackend, lr_factor  # noqa: F401
