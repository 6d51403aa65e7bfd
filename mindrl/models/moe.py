"""Mixture-of-experts fields of a Hugging Face ``config.json`` (Qwen3-MoE, Qwen2-MoE), read
without any framework: which decoder layers route their MLP through experts, and how.

A layer ``i`` is a sparse MoE block when the model has experts, ``i`` is not in
``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0`` (transformers' and vLLM's rule);
the other layers keep a dense SwiGLU MLP of ``intermediate_size``. ``num_experts`` is the Hub's
key; transformers 5 writes ``num_local_experts``: both are read.
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Tuple

import numpy as np

MOE_MODEL_TYPES = ("qwen3_moe", "qwen2_moe")


def num_experts(cfg: dict) -> int:
    """Routed experts per MoE layer; 0 for a dense model."""
    if cfg.get("model_type") not in MOE_MODEL_TYPES and not any(
            "Moe" in a for a in cfg.get("architectures") or []):
        return 0
    n = cfg.get("num_experts")
    if n is None:
        n = cfg.get("num_local_experts")
    return int(n or 0)


def moe_layer_flags(cfg: dict) -> List[bool]:
    """``flags[i]`` is True when decoder layer ``i`` is a sparse MoE block."""
    layers = int(cfg["num_hidden_layers"])
    experts = num_experts(cfg)
    if experts <= 0:
        return [False] * layers
    dense = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or 1)
    return [i not in dense and (i + 1) % step == 0 for i in range(layers)]


_FUSED_SUFFIXES = (".mlp.experts.gate_up_proj", ".mlp.experts.down_proj")


def unfuse_experts(named: Iterable[Tuple[str, np.ndarray]]) -> Iterator[Tuple[str, np.ndarray]]:
    """(name, array) pairs with transformers' in-memory fused expert tensors split into the
    per-expert checkpoint names (the names on disk, in the Hub's files and in the MindSpore
    model): ``...experts.gate_up_proj`` (E, 2I, H) -> ``...experts.{e}.gate_proj.weight`` (rows
    ``:I``) and ``...up_proj.weight`` (rows ``I:``); ``...experts.down_proj`` (E, H, I) ->
    ``...experts.{e}.down_proj.weight``. Other pairs pass unchanged."""
    for name, arr in named:
        if name.endswith(_FUSED_SUFFIXES[0]):
            half = arr.shape[1] // 2
            for e in range(arr.shape[0]):
                yield f"{name[:-len('gate_up_proj')]}{e}.gate_proj.weight", arr[e, :half]
                yield f"{name[:-len('gate_up_proj')]}{e}.up_proj.weight", arr[e, half:]
        elif name.endswith(_FUSED_SUFFIXES[1]):
            for e in range(arr.shape[0]):
                yield f"{name[:-len('down_proj')]}{e}.down_proj.weight", arr[e]
        else:
            yield name, arr


def layout_routes(routes: List[np.ndarray], prompt_lens: List[int], P: int, T: int
                  ) -> Optional[np.ndarray]:
    """A sampler's per-row expert choices ``(len(prompt) + len(response) - 1, L, k)`` as one
    ``(B, P+T, L, k)`` int16 array aligned with ``pad_token_batch(prompts, responses, pad, P,
    T)`` (prompts left-padded to P): -1 at padding and at each row's last token (never fed, so
    never routed). None when a row has no routes."""
    if not routes or any(r is None for r in routes):
        return None
    L, k = routes[0].shape[1], routes[0].shape[2]
    out = np.full((len(routes), P + T, L, k), -1, np.int16)
    for i, (r, p) in enumerate(zip(routes, prompt_lens)):
        n = min(len(r), p + T)
        out[i, P - p:P - p + n] = r[:n]
    return out
