"""Rollout engines behind one protocol (:mod:`mindrl.rollout.base`).

``build_engine(name, cfg, backend=..., model_path=...)`` imports the engine's module lazily
(it registers itself in :data:`mindrl.rollout.base.ENGINES`): ``native`` wraps the backend's own
sampler, ``vllm`` starts an in-process ``vllm.LLM``.
"""

from __future__ import annotations

import importlib

from mindrl.rollout.base import ENGINES, RolloutEngine

_MODULES = {"native": "mindrl.rollout.native_torch", "vllm": "mindrl.rollout.vllm_engine"}


def build_engine(name: str, cfg, **kwargs) -> RolloutEngine:
    """Construct engine ``name`` (``cfg`` a RunConfig); extra kwargs go to its factory."""
    if name not in ENGINES and name in _MODULES:
        importlib.import_module(_MODULES[name])
    return ENGINES.get(name)(cfg, **kwargs)
