"""What ``mindrl eval`` runs on when it is not told: ``--device auto`` is the accelerator present
(CUDA, then Ascend, else the CPU) and ``--dtype auto`` the model's own dtype on an accelerator
(``torch_dtype`` / ``dtype`` of its config.json, bfloat16 for the Qwen and DeepSeek checkpoints)
and float32 on CPU (CPU kernels and vLLM-CPU are exact and fastest there in float32)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Callable, Optional, Tuple

DTYPES = ("float32", "bfloat16", "float16")


def accelerator_present() -> str:
    """cuda when torch sees a CUDA device, ascend when torch_npu is installed and sees an NPU,
    else cpu."""
    import torch  # noqa: PLC0415

    if torch.cuda.is_available():
        return "cuda"
    if importlib.util.find_spec("torch_npu") is not None:
        import torch_npu  # noqa: F401, PLC0415

        if torch.npu.is_available():
            return "ascend"
    return "cpu"


def model_dtype(model_dir: str) -> Optional[str]:
    """The dtype a model directory's config.json names (transformers 5 ``dtype``, older
    ``torch_dtype``), if it is one of :data:`DTYPES`."""
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = cfg.get("dtype") or cfg.get("torch_dtype")
    return name if name in DTYPES else None


def resolve_defaults(settings, model_dir: str,
                     detect: Callable[[], str] = accelerator_present) -> Tuple[object, str]:
    """``settings`` with ``device`` / ``dtype`` 'auto' resolved, and the line that says what
    was chosen and why."""
    device, why_device = settings.device, "given"
    if device == "auto":
        device, why_device = detect(), "auto: the accelerator present"
    dtype, why_dtype = settings.dtype, "given"
    if dtype == "auto":
        own = model_dtype(model_dir)
        if device == "cpu":
            dtype, why_dtype = "float32", "auto: float32 on CPU"
        elif own:
            dtype, why_dtype = own, "auto: the model's"
        else:
            dtype, why_dtype = "bfloat16", "auto: the model names none"
    line = (f"[eval] device {device} ({why_device}), dtype {dtype} ({why_dtype}), engine "
            f"{settings.engine}" + (f", tensor parallel {settings.tensor_parallel_size}"
                                    if settings.tensor_parallel_size > 1 else ""))
    return dataclasses.replace(settings, device=device, dtype=dtype), line
