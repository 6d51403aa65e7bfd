"""Routing replay for mixture-of-experts models on the torch backend
(``model.moe.routing_replay``).

An MoE layer's router picks each token's top-k experts from ``softmax(x W_g^T)``. Two forwards
of the same policy can pick different experts for a token whose router is near-tied (another
kernel, another batch shape, a slightly updated weight), and one flipped expert changes the
token's log-prob far more than float noise: the rollout-vs-trainer gap and the PPO ratio then
measure routing noise instead of the policy. Replay makes a forward use recorded expert
indices instead of its own top-k, while the routing WEIGHTS are recomputed from the current
router (``softmax(z).gather(indices)``, renormalised when the model does), so the router still
gets its gradient. This is what verl (``router_replay.mode``: R2/R3), slime and the R3 paper
(arXiv 2510.11370) do.

Routes travel as ``(rows, positions, num_hidden_layers, k)`` int16 arrays aligned with
:class:`mindrl.types.TokenBatch` ``input_ids``; dense layers, padding and positions with no
record are ``-1`` and route natively (a row of the router's input with any index < 0 does).

:class:`RouterHooks` finds a transformers model's top-k routers (modules whose class name ends
in ``TopKRouter`` with ``top_k``: Qwen3-MoE, Qwen2-MoE, ... at ``model.layers.{i}.mlp.gate``)
and registers one forward hook each, idle unless a :meth:`recording` or :meth:`replaying`
context is active. One object per model (:meth:`of`), shared by the trainer and a sampler
that uses the trainer's own model.
"""

from __future__ import annotations

import contextlib
import re
from typing import Dict, Optional

import numpy as np

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.mlp\.gate$")


class RouterHooks:
    def __init__(self, model):
        self.routers: Dict[int, object] = {}
        for name, mod in model.named_modules():
            m = _LAYER.search(name)
            if m and type(mod).__name__.endswith("TopKRouter") and hasattr(mod, "top_k"):
                self.routers[int(m.group(1))] = mod
        cfg = getattr(model, "config", None)
        self.layers = int(getattr(cfg, "num_hidden_layers", 0) or
                          (max(self.routers) + 1 if self.routers else 0))
        self.k = int(next(iter(self.routers.values())).top_k) if self.routers else 0
        self._mode: Optional[str] = None
        self._targets = None                 # torch (N, L, k) long, the router rows' order
        self._records: Dict[int, object] = {}   # layer -> the last forward's indices
        self.flips = 0                       # replayed (token, layer) whose native set differs
        self.replayed = 0                    # replayed (token, layer) rows
        for layer, mod in self.routers.items():
            mod.register_forward_hook(self._hook(layer))

    @classmethod
    def of(cls, model) -> "RouterHooks":
        hooks = getattr(model, "_mindrl_router_hooks", None)
        if hooks is None:
            hooks = cls(model)
            model._mindrl_router_hooks = hooks
        return hooks

    @property
    def is_moe(self) -> bool:
        return bool(self.routers)

    # ------------------------------------------------------------------ the hook
    def _hook(self, layer: int):
        def hook(mod, args, out):
            if self._mode == "record":
                self._records[layer] = out[2].detach().to("cpu")
                return None
            if self._mode != "replay" or self._targets is None:
                return None
            import torch

            logits, _, native = out
            tgt = self._targets[:, layer, :]
            if tgt.shape[0] != native.shape[0]:
                raise RuntimeError(f"routing replay: layer {layer} routes {native.shape[0]} "
                                   f"tokens, the recorded routes have {tgt.shape[0]}")
            use_native = (tgt < 0).any(-1, keepdim=True)
            idx = torch.where(use_native, native, tgt)
            with torch.no_grad():
                rec = ~use_native.squeeze(-1)
                same = (native.sort(-1).values == idx.sort(-1).values).all(-1)
                self.flips += int((rec & ~same).sum())
                self.replayed += int(rec.sum())
            w = torch.softmax(logits, dim=-1, dtype=torch.float).gather(-1, idx)
            if getattr(mod, "norm_topk_prob", False):
                w = w / w.sum(-1, keepdim=True)
            return logits, w.to(logits.dtype), idx
        return hook

    # ------------------------------------------------------------------ contexts
    @contextlib.contextmanager
    def recording(self):
        """Record the routers' top-k indices of every forward inside; read them with
        :meth:`pop` after each forward."""
        old, self._mode, self._records = self._mode, "record", {}
        try:
            yield self
        finally:
            self._mode, self._records = old, {}

    def pop(self, rows: int, positions: int) -> np.ndarray:
        """The routes of the last forward as ``(rows, positions, L, k)`` int16 (the router saw
        ``rows * positions`` tokens, row-major); -1 for layers without a router."""
        out = np.full((rows, positions, self.layers, self.k), -1, np.int16)
        for layer, idx in self._records.items():
            out[:, :, layer] = idx.numpy().reshape(rows, positions, self.k)
        self._records = {}
        return out

    @contextlib.contextmanager
    def replaying(self, routes: Optional[np.ndarray], device):
        """Forwards inside use ``routes`` ((B, S, L, k) for a (B, S) input; None = native)."""
        if routes is None or not self.is_moe:
            yield self
            return
        import torch

        old = (self._mode, self._targets)
        flat = np.ascontiguousarray(routes.reshape(-1, routes.shape[2], routes.shape[3]))
        self._mode = "replay"
        self._targets = torch.from_numpy(flat.astype(np.int64)).to(device)
        try:
            yield self
        finally:
            self._mode, self._targets = old

    def take_flip_fraction(self) -> Optional[float]:
        """Share of replayed (token, layer) routes whose native top-k set differed, since the
        last call (None when nothing was replayed)."""
        frac = self.flips / self.replayed if self.replayed else None
        self.flips = self.replayed = 0
        return frac
