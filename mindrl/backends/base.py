"""The training-backend protocol: what the trainer needs from a framework.

Two implementations live beside this file: ``torch/`` (transformers) and ``mindspore/``.
They are the only places torch or mindspore is imported. Hugging Face parameter names are the
common language: ``named_weights()`` yields them, so any rollout engine can take the weights of
any backend without a mapping table.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Protocol, Tuple

import numpy as np

from mindrl.registry import Registry
from mindrl.types import LossNormalizers, TokenBatch, TrainBatch

BACKENDS: Registry = Registry("backend")


class Backend(Protocol):
    name: str
    tokenizer: Any                      # a transformers PreTrainedTokenizerFast (both backends)
    rank: int                           # this process's data-parallel rank (0 when alone)
    world_size: int                     # data-parallel ranks (torchrun / msrun), 1 when alone

    def all_reduce_sum(self, x: np.ndarray) -> np.ndarray:
        """Element-wise sum over ranks (identity when world_size == 1)."""

    def all_gather(self, x: np.ndarray) -> np.ndarray:
        """Concatenate same-shaped arrays from all ranks along axis 0, in rank order."""

    def barrier(self) -> None:
        ...

    def load_pretrained_weights(self, directory: str) -> None:
        """Load policy weights from an HF-format directory (resume)."""

    def logprobs(self, batch: TokenBatch, *, temperature: float, reference: bool = False,
                 micro_batch_size: int = 8) -> np.ndarray:
        """(B, T) float32 log pi(response token | prefix) with logits / temperature; the
        reference model when ``reference`` (requires ``load(with_reference=True)``)."""

    def train_step(self, micro_batches: List[TrainBatch], norm: LossNormalizers) -> Dict[str, float]:
        """One optimizer step: forward/backward each micro-batch of the RL loss
        (``algorithms.rl_loss``), accumulate, all-reduce across ranks, clip, step, schedule.
        ``old_logp is None`` means strictly on-policy: use the detached current log-probs.
        When ``rollout_logp`` is given, report ``rollout/logprob_gap_mean`` (mean |logp -
        rollout_logp| over response tokens) from the same forward.
        Returns metrics (loss parts, clip fractions, entropy, grad_norm, lr)."""

    def sft_step(self, micro_batches: List[TokenBatch], norm: LossNormalizers) -> Dict[str, float]:
        """One optimizer step of masked next-token NLL on the response tokens (SFT)."""

    def named_weights(self) -> Iterator[Tuple[str, np.ndarray]]:
        """Current policy weights as (Hugging Face name, array), for rollout engines."""

    def save_pretrained(self, directory: str) -> None:
        """Write HF-format weights + config + tokenizer (loadable by transformers and vLLM)."""

    def save_state(self, directory: str) -> None:
        """Optimizer, scheduler and RNG state (the weights are written by save_pretrained)."""

    def load_state(self, directory: str) -> None:
        ...

    def native_engine(self) -> Any:
        """A RolloutEngine that samples with this backend's own model (MindSpore). The torch
        backend offers ``sampling_model()`` instead, and
        :func:`mindrl.rollout.native_torch.make_native_engine` builds its engine."""


def build_backend(name: str, cfg, **kwargs) -> Backend:
    """Import the backend's module lazily (it registers itself) and construct it.

    MindSpore's own log lines (``[WARNING] ... Some side effect nodes were eliminated``,
    ``[INFO] ... Event base dispatch success``) are off unless ``logging.verbose`` is on or the
    user set ``GLOG_v``: MindSpore reads ``GLOG_v`` once, when it is first imported."""
    import importlib
    import os

    if name in ("mindspore", "mindformers"):
        verbose = bool(getattr(getattr(cfg, "logging", None), "verbose", False))
        os.environ.setdefault("GLOG_v", "1" if verbose else "3")

    module = {"torch": "mindrl.backends.torch", "mindspore": "mindrl.backends.mindspore",
              "mindformers": "mindrl.backends.mindformers.backend"}
    if name not in BACKENDS and name in module:
        importlib.import_module(module[name])
    return BACKENDS.get(name)(cfg, **kwargs)
