"""AdamW with gradient accumulation and global-norm clipping, as compiled MindSpore functions.

Written out instead of ``mint.optim.AdamW`` / ``nn.AdamWeightDecay`` because (PLATFORM.md)
``mint.optim.*`` silently never updates parameters in PyNative on CPU, and
``nn.AdamWeightDecay`` has no bias correction. Every state change goes through ``ops.assign``
inside ``mindspore.jit`` functions, which do update on CPU (tests check parameters move).

The update is torch's ``AdamW`` step exactly (decoupled decay, bias-corrected moments):

    p <- p (1 - lr wd)
    m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
    p <- p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)

with g = coef * (sum of the micro-batch gradients, summed across ranks), coef = min(1,
clip / (||g|| + 1e-6)) as ``torch.nn.utils.clip_grad_norm_``.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, ops


class AdamW:
    def __init__(self, params: List[Parameter], *, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, all_reduce: Optional[object] = None):
        self.params = list(params)
        self.b1, self.b2 = float(betas[0]), float(betas[1])
        self.eps, self.wd = float(eps), float(weight_decay)
        zeros = lambda p, tag: Parameter(Tensor(np.zeros(p.shape, np.float32)),  # noqa: E731
                                         name=f"{tag}.{p.name}", requires_grad=False)
        self.grads = [zeros(p, "grad_accum") for p in self.params]
        self.exp_avg = [zeros(p, "exp_avg") for p in self.params]
        self.exp_avg_sq = [zeros(p, "exp_avg_sq") for p in self.params]
        self.step = 0                     # completed updates (host side; bias corrections)
        self._all_reduce = all_reduce     # ops.AllReduce(SUM) under data parallelism
        self._accumulate = ms.jit(self._accumulate_impl)
        self._reduce_and_norm = ms.jit(self._reduce_and_norm_impl)
        self._update = ms.jit(self._update_impl)
        self._zero = ms.jit(self._zero_impl)

    # --- compiled pieces -------------------------------------------------------------------
    def _accumulate_impl(self, grads):
        for acc, g in zip(self.grads, grads):
            ops.assign_add(acc, g.astype(ms.float32))
        return ops.zeros((), ms.float32)

    def _reduce_and_norm_impl(self):
        total = ops.zeros((), ms.float32)
        for acc in self.grads:
            g = acc.value()
            if self._all_reduce is not None:
                g = self._all_reduce(g)
                ops.assign(acc, g)
            total = total + (g * g).sum()
        return ops.sqrt(total)

    def _update_impl(self, lr, coef, bc1, bc2_sqrt):
        b1, b2, eps, wd = self.b1, self.b2, self.eps, self.wd
        for p, acc, m, v in zip(self.params, self.grads, self.exp_avg, self.exp_avg_sq):
            g = acc.value() * coef
            m_new = m.value() * b1 + g * (1.0 - b1)
            v_new = v.value() * b2 + g * g * (1.0 - b2)
            p32 = p.value().astype(ms.float32) * (1.0 - lr * wd)
            p32 = p32 - (lr / bc1) * m_new / (ops.sqrt(v_new) / bc2_sqrt + eps)
            ops.assign(m, m_new)
            ops.assign(v, v_new)
            ops.assign(p, p32.astype(p.dtype))
            ops.assign(acc, ops.zeros_like(acc))
        return lr

    def _zero_impl(self):
        for acc in self.grads:
            ops.assign(acc, ops.zeros_like(acc))
        return ops.zeros((), ms.float32)

    # --- host API --------------------------------------------------------------------------
    def accumulate(self, grads) -> None:
        self._accumulate(grads)

    def grad_norm(self) -> float:
        """All-reduce (when data parallel) the accumulated gradients; their global L2 norm."""
        return float(self._reduce_and_norm().asnumpy())

    def apply(self, lr: float, clip: float, grad_norm: float) -> None:
        """One AdamW update from the accumulated gradients, which are then zeroed."""
        coef = min(1.0, clip / (grad_norm + 1e-6)) if clip > 0 else 1.0
        t = self.step + 1
        f = lambda x: Tensor(np.float32(x))  # noqa: E731
        self._update(f(lr), f(coef), f(1.0 - self.b1 ** t), f(np.sqrt(1.0 - self.b2 ** t)))
        self.step = t

    def zero_grad(self) -> None:
        self._zero()

    # --- state -----------------------------------------------------------------------------
    def state_arrays(self) -> Dict[str, np.ndarray]:
        out = {}
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq):
            out[f"exp_avg.{p.name}"] = m.asnumpy()
            out[f"exp_avg_sq.{p.name}"] = v.asnumpy()
        return out

    def load_state_arrays(self, arrays: Dict[str, np.ndarray], step: int) -> None:
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq):
            m.set_data(Tensor(arrays[f"exp_avg.{p.name}"], ms.float32))
            v.set_data(Tensor(arrays[f"exp_avg_sq.{p.name}"], ms.float32))
        self.step = int(step)
