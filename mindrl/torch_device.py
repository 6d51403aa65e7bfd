"""Where and in what dtype torch runs, read from the config: shared by the torch training
backend and the native torch sampler (both import it; it imports neither). Imports torch."""

from __future__ import annotations

import os

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_device(cfg) -> torch.device:
    """``cfg.device`` as a torch device; on cuda/ascend the local rank's (``LOCAL_RANK``)."""
    if cfg.device == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if cfg.device == "ascend":       # torch-npu registers the "npu" device when imported
        import torch_npu  # noqa: F401

        return torch.device("npu", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")
