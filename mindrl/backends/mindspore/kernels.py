"""The one place where the MindSpore backend chooses between fused Ascend kernels and portable
ops with CPU kernels.

``select_kernels(device_target)`` returns a :class:`Kernels` namespace; the model calls only its
four functions, and for the causal self-attention of a row longer than ``Kernels.long_rows``
(portable path only) :class:`BlockedCausalAttention`, which works in query blocks and holds no
(S, S) tensor in either pass. On ``CPU`` (and ``GPU``) it returns the portable path, built from ops that have
CPU kernels in both PyNative and graph mode (see PLATFORM.md: no ``ops.rms_norm``,
``ops.swiglu``, ``ops.rotary_position_embedding`` or ``ops.flash_attention_score`` on CPU). On
``Ascend`` it returns the fused path.

The fused path is written against the documented MindSpore 2.x signatures and is UNTESTED ON
HARDWARE here (no Ascend NPU is available); the CPU tests only check that the selection picks
the portable path and that the portable path matches transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import mindspore as ms
from mindspore import nn, ops

NEG_INF = -1e9   # additive mask value: finite, so a fully masked (pad) query row stays NaN-free
LONG_ROWS = 1024    # portable path: longer rows attend in query blocks (BlockedCausalAttention)
QUERY_BLOCK = 512


# --- portable path (CPU kernels) -------------------------------------------------------------
def rms_norm_portable(x, weight, eps: float):
    """x (..., H) -> weight * x / sqrt(mean(x^2) + eps), computed in float32 as transformers."""
    dtype = x.dtype
    h = x.astype(ms.float32)
    var = ops.mean(h * h, -1, keep_dims=True)
    h = h * ops.rsqrt(var + eps)
    return weight * h.astype(dtype)


def _rotate_half(x):
    # ops.split, not x[..., half:] / x[..., :half]: two StridedSlice kernels on the last axis
    # cost ~60 us on CPU (45% of a decode step's kernel time); one Split is ~free. Same values.
    x1, x2 = ops.split(x, x.shape[-1] // 2, -1)
    return ops.concat((-x2, x1), -1)


def rope_portable(q, k, cos, sin):
    """q (B, Nq, S, D), k (B, Nk, S, D), cos/sin (B, 1, S, D): the rotate-half RoPE."""
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def attention_portable(q, k, v, bias, scale: float):
    """Grouped-query attention without repeating K/V.

    q (B, Nq, Sq, D), k/v (B, Nk, Sk, D), bias (B, 1, Sq, Sk) additive (0 or NEG_INF)
    -> (B, Nq, Sq, D). Query heads are grouped as transformers does: head h uses kv head
    h // (Nq // Nk).
    """
    B, Nq, Sq, D = q.shape
    Nk, Sk = k.shape[1], k.shape[2]
    rep = Nq // Nk
    qg = q.reshape(B, Nk, rep * Sq, D)                                   # (B, Nk, rep*Sq, D)
    scores = ops.BatchMatMul(transpose_b=True)(qg, k) * scale            # (B, Nk, rep*Sq, Sk)
    scores = scores.reshape(B, Nq, Sq, Sk).astype(ms.float32) + bias
    probs = ops.softmax(scores, -1).astype(v.dtype)
    out = ops.BatchMatMul()(probs.reshape(B, Nk, rep * Sq, Sk), v)      # (B, Nk, rep*Sq, D)
    return out.reshape(B, Nq, Sq, D)


# --- long rows: causal attention in query blocks (portable) -------------------------------------
def _block_end(i0: int, block: int, S: int) -> int:
    # not min(): MindSpore 2.10's graph mode fails to compile min() of two ints
    end = i0 + block
    if end > S:
        end = S
    return end


class _QueryBlockAttention(nn.Cell):
    """One query block's attention with a backward that recomputes its probabilities.

    qb (B, Nq, Bq, D) the block's queries, k/v (B, Nk, Sk, D) the keys it may see, key_mask
    (B, Sk), q_slots (Bq,) / k_slots (Sk,) int32 the queries' and keys' slots -> (B, Nq, Bq, D).
    Backward, with P = softmax(scale q k^T + bias) recomputed and dO the output's gradient:
    dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(dO * O)); dQ = scale dS K; dK = scale dS^T Q.
    (The slots are inputs: MindSpore 2.10 fails to compile ``ops.arange`` inside ``bprop``.)
    """

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.bmm = ops.BatchMatMul()
        self.bmm_nt = ops.BatchMatMul(transpose_b=True)
        self.bmm_tn = ops.BatchMatMul(transpose_a=True)
        # primitives, not ops.softmax / ops.zeros_like / Tensor.sum: MindSpore 2.10 fails to
        # compile a ``bprop`` that calls a function with Python branches
        self.softmax = ops.Softmax(-1)
        self.row_sum = ops.ReduceSum(keep_dims=True)
        self.zeros_like = ops.ZerosLike()

    def probs(self, qb, k, key_mask, q_slots, k_slots):
        """(B, Nk, rep*Bq, Sk) float32 probabilities and the grouped queries (B, Nk, rep*Bq, D):
        the rows of ``attention_portable`` with the bias of ``Qwen2ForCausalLM.attn_bias``."""
        B, Nq, Bq, D = qb.shape
        Nk, Sk = k.shape[1], k.shape[2]
        qg = qb.reshape(B, Nk, (Nq // Nk) * Bq, D)
        s = self.bmm_nt(qg, k) * self.scale                                   # (B, Nk, rep*Bq, Sk)
        causal = (k_slots.reshape(1, -1) <= q_slots.reshape(-1, 1)).astype(ms.float32)       # (Bq, Sk)
        allowed = causal.reshape(1, 1, Bq, Sk) * \
            key_mask.astype(ms.float32).reshape(B, 1, 1, Sk)
        s = s.reshape(B, Nq, Bq, Sk).astype(ms.float32) + (1.0 - allowed) * NEG_INF
        return self.softmax(s).reshape(B, Nk, (Nq // Nk) * Bq, Sk), qg

    def construct(self, qb, k, v, key_mask, q_slots, k_slots):
        B, Nq, Bq, D = qb.shape
        p, _ = self.probs(qb, k, key_mask, q_slots, k_slots)
        return self.bmm(p.astype(v.dtype), v).reshape(B, Nq, Bq, D)

    def bprop(self, qb, k, v, key_mask, q_slots, k_slots, out, dout):
        B, Nq, Bq, D = qb.shape
        Nk = k.shape[1]
        n = (Nq // Nk) * Bq
        p, qg = self.probs(qb, k, key_mask, q_slots, k_slots)                          # (B, Nk, n, Sk)
        do = dout.reshape(B, Nk, n, D)
        dv = self.bmm_tn(p.astype(v.dtype), do)                               # (B, Nk, Sk, D)
        delta = self.row_sum(dout.astype(ms.float32) * out.astype(ms.float32), -1)
        dp = self.bmm_nt(do, v).astype(ms.float32)                            # (B, Nk, n, Sk)
        ds = (p * (dp - delta.reshape(B, Nk, n, 1)) * self.scale).astype(qb.dtype)
        dq = self.bmm(ds, k).reshape(B, Nq, Bq, D)
        dk = self.bmm_tn(ds, qg)                                              # (B, Nk, Sk, D)
        return dq, dk, dv, self.zeros_like(key_mask), self.zeros_like(q_slots), \
            self.zeros_like(k_slots)


class BlockedCausalAttention(nn.Cell):
    """Causal self-attention of a long row in blocks of ``block`` queries, each with a backward
    that recomputes its probabilities (:class:`_QueryBlockAttention`), so neither pass holds an
    (S, S) tensor or bias.

    q (B, Nq, S, D), k/v (B, Nk, S, D) at slots 0..S-1, key_mask (B, S) (1 = a real token)
    -> (B, Nq, S, D), equal to ``attention_portable`` with the bias of
    ``Qwen2ForCausalLM.attn_bias`` (GQA grouped the same way). Query block [i0, i1) sees keys
    [0, i1) only (the later ones are masked by causality), so the work and the largest tensor,
    (B, Nq, block, i1) float32, are about half of a full pass's. A query with no key allowed
    (a left-pad slot) averages the keys up to its block's end instead of all keys: its output
    is arbitrary in both and reaches no real token.
    """

    def __init__(self, scale: float, block: int):
        super().__init__()
        self.block = block
        self.attend = _QueryBlockAttention(scale)

    def construct(self, q, k, v, key_mask):
        S = q.shape[2]
        slots = ops.arange(0, S, 1, dtype=ms.int32)
        outs = ()
        for i0 in range(0, S, self.block):
            i1 = _block_end(i0, self.block, S)
            outs = outs + (self.attend(q[:, :, i0:i1], k[:, :, :i1], v[:, :, :i1],
                                       key_mask[:, :i1], slots[i0:i1], slots[:i1]),)
        return ops.concat(outs, 2)

def swiglu_portable(gate, up):
    return ops.silu(gate) * up


# --- fused path (Ascend; untested on hardware here) --------------------------------------------
def rms_norm_fused(x, weight, eps: float):
    return ops.rms_norm(x, weight, eps)[0]


def rope_fused(q, k, cos, sin):
    # mode 0 = rotate-half, the layout of Qwen2 checkpoints.
    return (ops.rotary_position_embedding(q, cos, sin, 0),
            ops.rotary_position_embedding(k, cos, sin, 0))


def attention_fused(q, k, v, bias, scale: float):
    # flash_attention_score takes a mask where 1 = masked out; BNSD layout; GQA is native
    # (query heads a multiple of kv heads).
    mask = (bias < (NEG_INF / 2)).astype(ms.uint8)
    return ops.flash_attention_score(q, k, v, q.shape[1], attn_mask=mask, scalar_value=scale,
                                     input_layout="BNSD")


def swiglu_fused(gate, up):
    return ops.swiglu(ops.concat((gate, up), -1), -1)


@dataclass(frozen=True)
class Kernels:
    name: str
    rms_norm: Callable
    rope: Callable
    attention: Callable
    swiglu: Callable
    # causal self-attention of more than ``long_rows`` queries runs in blocks of ``query_block``
    # queries (:class:`BlockedCausalAttention`) from the key mask, never building the (S, S)
    # bias; 0 = always ``attention`` with the full bias
    long_rows: int = 0
    query_block: int = 512


PORTABLE = Kernels("portable", rms_norm_portable, rope_portable, attention_portable,
                   swiglu_portable, long_rows=LONG_ROWS, query_block=QUERY_BLOCK)
FUSED = Kernels("ascend-fused", rms_norm_fused, rope_fused, attention_fused, swiglu_fused)


def select_kernels(device_target: str | None = None) -> Kernels:
    """The kernel set for ``device_target`` (default: the current MindSpore context)."""
    target = device_target or ms.get_context("device_target")
    return FUSED if str(target).lower() == "ascend" else PORTABLE
