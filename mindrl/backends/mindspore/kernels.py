"""The one place where the MindSpore backend chooses between fused Ascend kernels and portable
ops with CPU kernels.

``select_kernels(device_target)`` returns a :class:`Kernels` namespace; the model calls only its
four functions. On ``CPU`` (and ``GPU``) it returns the portable path, built from ops that have
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
from mindspore import ops

NEG_INF = -1e9   # additive mask value: finite, so a fully masked (pad) query row stays NaN-free


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


PORTABLE = Kernels("portable", rms_norm_portable, rope_portable, attention_portable,
                   swiglu_portable)
FUSED = Kernels("ascend-fused", rms_norm_fused, rope_fused, attention_fused, swiglu_fused)


def select_kernels(device_target: str | None = None) -> Kernels:
    """The kernel set for ``device_target`` (default: the current MindSpore context)."""
    target = device_target or ms.get_context("device_target")
    return FUSED if str(target).lower() == "ascend" else PORTABLE
