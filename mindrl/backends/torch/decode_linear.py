"""Linear layers with weights packed once for the decode loop on CPU.

A decode step multiplies the live rows (one per sequence still running: 1 to a few dozen) by
every weight matrix, so it reads each weight once and memory bandwidth bounds it. torch's
default CPU kernels lose much of that bandwidth at these shapes (``bench/decode_matmul.py``;
2-core AVX-512 host, one thread, Qwen2.5-0.5B's 151,936 x 896 head):

- bfloat16 ``F.linear`` goes to oneDNN with the weight in torch's plain layout, and oneDNN
  reorders the whole weight into its blocked layout on every call: the product reads and writes
  the weight about three times;
- float32 ``F.linear`` goes to MKL, whose kernel for 2-64 rows against the head reads the
  weight at a third to a half of its one-row rate (one row, a matrix-vector product, is fast),
  and the live batch passes through these sizes as rows finish.

:class:`PackedLinears` packs each ``torch.nn.Linear`` weight of a model once into oneDNN's
blocked layout (``torch.ops.mkldnn._reorder_linear_weight``) and, while open, sends those
layers' no-grad forwards through ``torch.ops.mkldnn._linear_pointwise`` on the packed copy:
one read of the weight per step (each weight is packed at its first such call). Measured per
weight shape and row count (1-64 rows, the vocabulary head and a decoder layer's linears,
under load): packed / ``F.linear`` time 0.5-0.9 in bfloat16 at every row count, 0.3-0.6 for
the float32 head at 2-64 rows; at one float32 row MKL's matrix-vector product is as fast on the
head and up to 3x faster on the small body matrices, so float32 goes packed from
:data:`MIN_ROWS` rows up. bfloat16 results equal ``F.linear``'s bit for bit wherever
``F.linear`` itself calls oneDNN (every product above 16^3 multiply-adds: the same kernel,
float32 accumulation); float32 results differ from MKL's by summation order (~1e-6 relative).
The packed copies cost as much memory as the packed weights
and live until :meth:`PackedLinears.close`.

A layer keeps its own forward (the plain product on its current weight) for a call with
gradients on, from another thread, with another dtype, or after its weight changed in place
since packing.
"""

from __future__ import annotations

import threading
from typing import List

PACKABLE = ("float32", "bfloat16")
# fewest rows (product of the input's leading dimensions) that go through the packed weight
MIN_ROWS = {"float32": 2, "bfloat16": 1}


def packing_supported(dtype) -> bool:
    """Whether oneDNN weight packing runs here for ``dtype`` (torch built with oneDNN, its
    linear ops present; bfloat16 also needs the CPU's bf16 support)."""
    import torch

    if str(dtype).replace("torch.", "") not in PACKABLE:
        return False
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        mk = torch.ops.mkldnn
        mk._reorder_linear_weight, mk._linear_pointwise            # noqa: B018 (present?)
        return dtype != torch.bfloat16 or bool(mk._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def pack_weight(weight):
    """``weight`` (out, in) in oneDNN's blocked layout for :func:`packed_linear`."""
    import torch

    return torch.ops.mkldnn._reorder_linear_weight(weight.detach())


def packed_linear(x, packed, bias):
    """``F.linear(x, W, bias)`` with ``packed = pack_weight(W)``; ``x`` (..., in)."""
    import torch

    y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), packed, bias, "none",
                                           [], "")
    return y.reshape(*x.shape[:-1], y.shape[-1])


class PackedLinears:
    """The ``torch.nn.Linear`` layers of ``model`` sent through packed weights between
    :meth:`pack` and :meth:`close`. A layer's weight is packed at its first call that would use
    the packed copy (so a float32 decode that stays at one row packs nothing). Layers left
    alone: subclasses, weights not on the CPU, of another dtype than float32 / bfloat16 (or
    bfloat16 without the CPU's support), or not plain tensors."""

    def __init__(self, model):
        self.model = model
        self.layers: List = []              # (module, its _Packed)
        self.routed = False

    def pack(self) -> int:
        """Route every eligible layer (once; later calls do nothing); returns their number."""
        if self.routed:
            return len(self.layers)
        import torch

        self.routed = True
        owner = threading.get_ident()
        for mod in self.model.modules():
            w = getattr(mod, "weight", None)
            if type(mod) is not torch.nn.Linear or "forward" in vars(mod) or w is None \
                    or type(w.data) is not torch.Tensor or w.device.type != "cpu" \
                    or w.dim() != 2 or not packing_supported(w.dtype):
                continue
            state = _Packed(mod, owner)
            mod.forward = state.forward
            self.layers.append((mod, state))
        return len(self.layers)

    def packed_bytes(self) -> int:
        """Bytes of the packed copies made so far (the plain weights' size)."""
        return sum(st.weight.numel() * st.weight.element_size()
                   for _, st in self.layers if st.packed is not None)

    def close(self) -> None:
        """Give every layer its own forward back and free the packed copies."""
        for mod, _ in self.layers:
            del mod.forward
        self.layers, self.routed = [], False

    def __enter__(self) -> "PackedLinears":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Packed:
    """One layer's packed copy (made at its first eligible call) and its forward."""

    def __init__(self, mod, owner: int):
        self.mod, self.owner = mod, owner
        self.weight = mod.weight
        self.min_rows = MIN_ROWS[str(self.weight.dtype).replace("torch.", "")]
        self.packed = self.version = None

    def forward(self, x):
        import torch
        import torch.nn.functional as F

        mod, w = self.mod, self.weight
        if torch.is_grad_enabled() or x.dtype != w.dtype or mod.weight is not w \
                or threading.get_ident() != self.owner or x.numel() < self.min_rows * x.shape[-1] \
                or (self.packed is not None and w._version != self.version):
            return F.linear(x, mod.weight, mod.bias)
        if self.packed is None:
            try:
                self.packed, self.version = pack_weight(w), w._version
            except RuntimeError:          # oneDNN refused this weight: the plain product
                self.min_rows = float("inf")
                return F.linear(x, mod.weight, mod.bias)
        return packed_linear(x, self.packed, mod.bias)
