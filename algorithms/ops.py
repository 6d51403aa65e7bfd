"""A tiny array-ops namespace so token-level loss math is written once for three backends.

``get_ops("numpy" | "torch" | "mindspore")`` returns an object with the same small set of
functions. The numpy one is the float64 reference the tests compare against; the torch and
mindspore ones are differentiable. Frameworks are imported lazily, inside the factories, so
``import algorithms`` never pulls torch or mindspore.

Conventions shared by every implementation:

* reductions take ``axis=None`` (all elements) or an int, and ``keepdims``;
* ``*_last`` and ``log_softmax`` / ``softmax`` / ``logsumexp`` work on the last axis;
* ``gather_last(x (..., V), index (...)) -> (...)`` picks one entry per position
  (``take_along_axis`` on the last axis, then squeezed), e.g. token log-probs from log-softmax;
* ``as_float(x, like)`` turns x (a bool / int mask, a NumPy array, a tensor) into a tensor of
  ``like``'s float dtype (and torch device), or of the backend's default float (float64 numpy,
  float32 torch / mindspore) when ``like`` is None;
* binary functions accept a Python scalar as their second argument;
* ``rank_flat(x)`` is each element's 0-based ascending rank among ALL elements of x (ties by
  position), as a float tensor of x's shape; ``flat_positions(x)`` is each element's row-major
  index, as floats. With them a loss picks "the k smallest" for a k held in a tensor, with
  static shapes (no top-k of data-dependent size), so it compiles into a MindSpore graph.

The MindSpore implementation uses only ops with CPU kernels in both PyNative and graph mode
(see ../shared/PLATFORM.md): ``ops.log_softmax``, ``ops.gather_elements``, and
``max + log(sum(exp))`` instead of ``mint.logsumexp``; no ``mint.*``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict

import numpy as np

BACKENDS = ("numpy", "torch", "mindspore")


class Ops:
    """Base class: backend-neutral helpers built on the primitives each backend supplies."""

    name = "base"

    # --- composites written once over the primitives -----------------------------------
    def logsumexp(self, x):
        """log(sum(exp(x))) over the last axis, stable: max (no gradient) + log-sum-exp."""
        m = self.stop_gradient(self.amax(x, axis=-1, keepdims=True))
        return self.log(self.sum(self.exp(x - m), axis=-1)) + self.squeeze_last(m)

    def masked_mean(self, x, mask, axis=None):
        """sum(x * mask) / max(sum(mask), 1); 0 where the mask is empty."""
        return self.sum(x * mask, axis=axis) / self.maximum(self.sum(mask, axis=axis), 1.0)

    def sigmoid(self, x):
        """1 / (1 + exp(-x)), stable for large |x| (via log_sigmoid)."""
        return self.exp(self.log_sigmoid(x))

    def token_logprobs(self, logits, tokens):
        """(B, T, V) logits, (B, T) token ids -> (B, T) log pi(token)."""
        return self.gather_last(self.log_softmax(logits), tokens)

    def __repr__(self) -> str:
        return f"<ops {self.name}>"


class NumpyOps(Ops):
    """Float64 NumPy reference; ``stop_gradient`` is the identity."""

    name = "numpy"

    def asarray(self, x, dtype=None):
        return np.asarray(x, dtype=np.float64 if dtype is None else dtype)

    def to_numpy(self, x):
        return np.asarray(x)

    def as_float(self, x, like=None):
        return np.asarray(x, dtype=np.float64 if like is None else np.asarray(like).dtype)

    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    log1p = staticmethod(np.log1p)
    abs = staticmethod(np.abs)
    sqrt = staticmethod(np.sqrt)
    square = staticmethod(np.square)
    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    where = staticmethod(np.where)
    zeros_like = staticmethod(np.zeros_like)
    ones_like = staticmethod(np.ones_like)

    def clamp(self, x, lo=None, hi=None):
        return np.clip(x, lo, hi)

    def sum(self, x, axis=None, keepdims=False):
        return np.sum(x, axis=axis, keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return np.mean(x, axis=axis, keepdims=keepdims)

    def amax(self, x, axis=None, keepdims=False):
        return np.max(x, axis=axis, keepdims=keepdims)

    def amin(self, x, axis=None, keepdims=False):
        return np.min(x, axis=axis, keepdims=keepdims)

    def squeeze_last(self, x):
        return np.squeeze(x, -1)

    def log_sigmoid(self, x):
        return -np.logaddexp(0.0, -x)

    def log_softmax(self, x):
        return x - self.logsumexp(x)[..., None]

    def softmax(self, x):
        return np.exp(self.log_softmax(x))

    def gather_last(self, x, index):
        index = np.asarray(index).astype(np.int64)
        return np.take_along_axis(x, index[..., None], axis=-1)[..., 0]

    def stop_gradient(self, x):
        return x

    sign = staticmethod(np.sign)
    floor = staticmethod(np.floor)

    def rank_flat(self, x):
        flat = np.reshape(x, -1)
        order = np.argsort(flat, kind="stable")
        return np.argsort(order, kind="stable").reshape(np.shape(x)).astype(np.asarray(x).dtype)

    def flat_positions(self, x):
        return np.arange(np.size(x), dtype=np.asarray(x).dtype).reshape(np.shape(x))


class TorchOps(Ops):
    name = "torch"

    def __init__(self):
        import torch
        import torch.nn.functional as F

        self.torch, self.F = torch, F
        self.exp, self.log, self.log1p = torch.exp, torch.log, torch.log1p
        self.abs, self.sqrt, self.square = torch.abs, torch.sqrt, torch.square
        self.zeros_like, self.ones_like = torch.zeros_like, torch.ones_like

    def asarray(self, x, dtype=None):
        return self.torch.as_tensor(np.asarray(x), dtype=dtype or self.torch.float32)

    def to_numpy(self, x):
        if isinstance(x, self.torch.Tensor):
            return x.detach().cpu().float().numpy() if x.dtype == self.torch.bfloat16 \
                else x.detach().cpu().numpy()
        return np.asarray(x)

    def as_float(self, x, like=None):
        x = x if isinstance(x, self.torch.Tensor) else self.torch.as_tensor(np.asarray(x))
        if like is None:
            return x.to(self.torch.float32)
        return x.to(dtype=like.dtype, device=like.device)

    def clamp(self, x, lo=None, hi=None):
        return self.torch.clamp(x, min=lo, max=hi)

    def minimum(self, x, y):
        if not isinstance(y, self.torch.Tensor):
            return self.torch.clamp(x, max=y)
        return self.torch.minimum(x, y)

    def maximum(self, x, y):
        if not isinstance(y, self.torch.Tensor):
            return self.torch.clamp(x, min=y)
        return self.torch.maximum(x, y)

    def where(self, cond, x, y):
        return self.torch.where(cond, x, y)

    def sum(self, x, axis=None, keepdims=False):
        return x.sum() if axis is None else x.sum(dim=axis, keepdim=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return x.mean() if axis is None else x.mean(dim=axis, keepdim=keepdims)

    def amax(self, x, axis=None, keepdims=False):
        return x.max() if axis is None else self.torch.amax(x, dim=axis, keepdim=keepdims)

    def amin(self, x, axis=None, keepdims=False):
        return x.min() if axis is None else self.torch.amin(x, dim=axis, keepdim=keepdims)

    def squeeze_last(self, x):
        return x.squeeze(-1)

    def log_sigmoid(self, x):
        return self.F.logsigmoid(x)

    def log_softmax(self, x):
        return self.torch.log_softmax(x, dim=-1)

    def softmax(self, x):
        return self.torch.softmax(x, dim=-1)

    def gather_last(self, x, index):
        return self.torch.gather(x, -1, index.long().unsqueeze(-1)).squeeze(-1)

    def stop_gradient(self, x):
        return x.detach()

    def sign(self, x):
        return self.torch.sign(x)

    def floor(self, x):
        return self.torch.floor(x)

    def rank_flat(self, x):
        flat = x.detach().reshape(-1)
        order = self.torch.argsort(flat, stable=True)
        return self.torch.argsort(order, stable=True).reshape(x.shape).to(x.dtype)

    def flat_positions(self, x):
        return self.torch.arange(x.numel(), dtype=x.dtype, device=x.device).reshape(x.shape)


def _warm_up_mindspore(ms) -> None:
    """Absorb MindSpore 2.10's one-time numpy-2 failure.

    With numpy 2, the first Tensor arithmetic operator of a process tries the numpy 1.x C API,
    prints "A module that was compiled using NumPy 1.x cannot be run in NumPy 2..." and raises
    ``SystemError: <method '__mul__' of 'TensorPy' objects> returned a result with an exception
    set``; every later call works. Spend that first call here, on a throwaway tensor.
    """
    import os
    import sys

    probe = ms.Tensor(np.ones(1, dtype=np.float32))
    sys.stderr.flush()
    saved = os.dup(2)                       # the message is written to fd 2 by C code: mute it
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        for _ in range(2):
            try:
                (probe * probe + 1.0).asnumpy()
                return
            except SystemError:
                continue
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class MindSporeOps(Ops):
    """MindSpore ``ops.*`` with CPU kernels in PyNative and graph mode (no ``mint.*``)."""

    name = "mindspore"

    def __init__(self):
        import mindspore as ms
        from mindspore import ops

        self.ms, self.P = ms, ops
        _warm_up_mindspore(ms)
        self.exp, self.log, self.log1p = ops.exp, ops.log, ops.log1p
        self.abs, self.sqrt, self.square = ops.abs, ops.sqrt, ops.square
        self.zeros_like, self.ones_like = ops.zeros_like, ops.ones_like
        self.stop_gradient = ops.stop_gradient

    def asarray(self, x, dtype=None):
        return self.ms.Tensor(np.asarray(x), dtype=dtype or self.ms.float32)

    def to_numpy(self, x):
        if isinstance(x, self.ms.Tensor):
            if x.dtype == self.ms.bfloat16:
                x = x.astype(self.ms.float32)
            return x.asnumpy()
        return np.asarray(x)

    def as_float(self, x, like=None):
        x = x if isinstance(x, self.ms.Tensor) else self.ms.Tensor(np.asarray(x))
        return x.astype(self.ms.float32 if like is None else like.dtype)

    def clamp(self, x, lo=None, hi=None):
        return self.P.clamp(x, lo, hi)

    def minimum(self, x, y):
        return self.P.minimum(x, y)

    def maximum(self, x, y):
        return self.P.maximum(x, y)

    def where(self, cond, x, y):
        return self.P.where(cond, x, y)

    def sum(self, x, axis=None, keepdims=False):
        return x.sum() if axis is None else x.sum(axis=axis, keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return x.mean() if axis is None else x.mean(axis=axis, keep_dims=keepdims)

    def amax(self, x, axis=None, keepdims=False):
        return x.max() if axis is None else x.max(axis=axis, keepdims=keepdims)

    def amin(self, x, axis=None, keepdims=False):
        return x.min() if axis is None else x.min(axis=axis, keepdims=keepdims)

    def squeeze_last(self, x):
        return x.squeeze(-1)

    def log_sigmoid(self, x):
        # min(x, 0) - log(1 + exp(-|x|)): stable for large |x| in both directions.
        return self.P.minimum(x, 0.0) - self.P.log1p(self.P.exp(-self.P.abs(x)))

    def log_softmax(self, x):
        return self.P.log_softmax(x, -1)

    def softmax(self, x):
        return self.P.softmax(x, -1)

    def gather_last(self, x, index):
        index = index.astype(self.ms.int32).expand_dims(-1)
        return self.P.gather_elements(x, x.ndim - 1, index).squeeze(-1)

    def sign(self, x):
        return self.P.sign(x)

    def floor(self, x):
        return self.P.floor(x)

    def rank_flat(self, x):
        flat = self.P.stop_gradient(x).reshape(-1)
        order = self.P.argsort(flat)
        return self.P.argsort(order).reshape(x.shape).astype(x.dtype)

    def flat_positions(self, x):
        n = 1
        for d in x.shape:
            n = n * d
        return self.P.arange(0, n, 1).astype(x.dtype).reshape(x.shape)


_FACTORIES: Dict[str, Callable[[], Ops]] = {
    "numpy": NumpyOps,
    "torch": TorchOps,
    "mindspore": MindSporeOps,
}


@functools.lru_cache(maxsize=None)
def get_ops(name: str) -> Ops:
    """The ops namespace for ``name`` (numpy, torch or mindspore); imports the framework."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown ops backend '{name}'; valid names: {', '.join(BACKENDS)}") \
            from None
    return factory()


def to_numpy(x: Any) -> np.ndarray:
    """Any backend tensor (or number / array) -> a NumPy array, detached, bf16 widened."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        return get_ops("torch").to_numpy(x)
    if mod.startswith("mindspore"):
        return get_ops("mindspore").to_numpy(x)
    return np.asarray(x)
