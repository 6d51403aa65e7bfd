"""The one place where the MindSpore backend chooses between fused Ascend kernels and portable
ops with CPU kernels.

``select_kernels(device_target)`` returns a :class:`Kernels` namespace; the model calls only its
four functions, and for the causal self-attention of a row longer than ``Kernels.long_rows``
(portable path only) :class:`BlockedCausalAttention`, which works in query blocks and holds no
(S, S) tensor in either pass. On ``CPU`` (and ``GPU``) it returns the portable path, built from
ops that have CPU kernels in both PyNative and graph mode (see PLATFORM.md: no ``ops.rms_norm``,
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
from mindspore import Tensor, nn, ops

from mindrl.backends.attention_blocks import (  # noqa: F401  (kernels.LONG_ROWS, ...)
    BLOCK_SCORES, LONG_ROWS, QUERY_BLOCK, query_block)

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


# --- long rows: causal attention in query blocks (portable) -------------------------------------
KEY_SPANS = 2   # the query blocks in up to this many runs, each scoring only the keys it can see
                # (2: 3/4 of the scores for +0.26 GB peak at 1,040 tokens; 4: 5/8 for +0.79 GB)
SPAN_KEYS = 5120    # longer rows (blocks shrunk for memory): one run (each run keeps its buffers)


def key_spans(nb: int, spans: int, keys: int):
    """The ``nb`` query blocks cut into at most ``spans`` runs [lo, hi) of near-equal size: run
    [lo, hi) scores the keys of blocks 0..hi-1 (causal: the later keys are masked for all its
    queries), so the blocks score about (spans + 1) / (2 spans) of the (S, S) pairs; one run
    on a row of more than ``SPAN_KEYS`` ``keys``. Plain Python on constants, no ``min``/``or``
    (graph mode unrolls it: one loop per run)."""
    n = spans
    if n > nb:
        n = nb
    if n < 1:
        n = 1
    if keys > SPAN_KEYS:
        n = 1
    out = ()
    for i in range(n):
        out = out + ((nb * i // n, nb * (i + 1) // n),)
    return out


class _QueryBlocks(nn.Cell):
    """The loops of :class:`BlockedCausalAttention`: graph ``while`` loops over query blocks, so
    one block's buffers serve every block (unrolled blocks each keep their own: a compiled
    MindSpore graph on CPU does not reuse one kernel output's memory for another's).

    q (B, Nq, nb*Bq, D), k/v (B, Nk, S, D), key_mask (B, S) float32, slots (S,) int32 =
    0..S-1, first (Bq,) int32 = 0..Bq-1, blocks (nb,) int32 = 0..nb-1 -> (B, Nq, nb*Bq, D).
    Query q_i sits at slot i and sees the real keys at slots <= i. Every input a tensor and
    every op a primitive: MindSpore 2.10 fails to compile ``ops.arange``, ``ops.softmax`` and
    other functions with Python branches inside ``bprop``.

    Backward, per block with P = softmax(scale q k^T + bias) recomputed and dO the output's
    gradient: dV += P^T dO; dP = dO V^T; dS = P (dP - rowsum(dO * O)); dQ = scale dS K;
    dK += scale dS^T Q.
    """

    def __init__(self, scale: float, spans: int = KEY_SPANS):
        super().__init__()
        self.scale = scale
        self.spans = spans
        self.bmm = ops.BatchMatMul()
        self.bmm_nt = ops.BatchMatMul(transpose_b=True)
        self.bmm_tn = ops.BatchMatMul(transpose_a=True)
        self.softmax = ops.Softmax(-1)
        self.row_sum = ops.ReduceSum(keep_dims=True)
        self.zeros_like = ops.ZerosLike()
        self.gather = ops.Gather()
        self.select = ops.Select()
        self.masked = Tensor(NEG_INF, ms.float32)

    def _rows(self, x, idx, nk: int):
        """x (B, N, Sq, E) -> rows ``idx`` grouped as (B, nk, N/nk * Bq, E)."""
        xb = self.gather(x, idx, 2)
        return xb.reshape(x.shape[0], nk, (x.shape[1] // nk) * idx.shape[0], x.shape[3])

    def _probs(self, qg, k, key_mask, idx, slots):
        """Block probabilities (B, Nk, rep*Bq, S) float32 of grouped queries qg at slots idx."""
        B, Nk, n, _ = qg.shape
        Bq, S = idx.shape[0], k.shape[2]
        # the scale on the (n, D) queries, not the (n, S) scores: one (Bq, S) buffer less
        s = self.bmm_nt(qg * self.scale, k)                                   # (B, Nk, n, S)
        causal = slots.reshape(1, 1, 1, S) <= idx.reshape(1, 1, Bq, 1)
        allowed = ops.logical_and(causal, key_mask.reshape(B, 1, 1, S) > 0.5)  # (B, 1, Bq, S)
        # select, not + bias: one (Bq, S) buffer less; the same values where a key is allowed
        # (s + 0) and, after the softmax, exactly 0 where it is not
        s = self.select(allowed, s.reshape(B, Nk * (n // Bq), Bq, S).astype(ms.float32),
                        self.masked)
        return self.softmax(s).reshape(B, Nk, n, S)

    def _place(self, blocks, j, xb):
        """xb (B, N, Bq, D) as block j of a (B, N, nb, Bq, D) tensor, zeros elsewhere."""
        here = (blocks == j).astype(xb.dtype).reshape(1, 1, blocks.shape[0], 1, 1)
        return here * xb.reshape(xb.shape[0], xb.shape[1], 1, xb.shape[2], xb.shape[3])

    def construct(self, q, k, v, key_mask, slots, first, blocks):
        B, Nq, Sq, D = q.shape
        Nk, nb, Bq, S = k.shape[1], blocks.shape[0], first.shape[0], k.shape[2]
        out = self.zeros_like(q).reshape(B, Nq, nb, Bq, D)
        for lo, hi in key_spans(nb, self.spans, S):
            # query blocks lo..hi-1 see keys at slots < hi * Bq only: the rest are masked
            keys = hi * Bq
            if keys > S:
                keys = S
            ks, vs = k[:, :, :keys], v[:, :, :keys]
            km, sl = key_mask[:, :keys], slots[:keys]
            j = blocks[0] + lo
            while j < hi:
                idx = j * Bq + first
                p = self._probs(self._rows(q, idx, Nk), ks, km, idx, sl)
                o = self.bmm(p.astype(v.dtype), vs).reshape(B, Nq, Bq, D)
                out = out + self._place(blocks, j, o)
                j = j + 1
        return out.reshape(B, Nq, Sq, D)

    def bprop(self, q, k, v, key_mask, slots, first, blocks, out, dout):
        B, Nq, Sq, D = q.shape
        Nk, nb, Bq, S = k.shape[1], blocks.shape[0], first.shape[0], k.shape[2]
        delta = self.row_sum(dout.astype(ms.float32) * out.astype(ms.float32), -1)
        dq = self.zeros_like(q).reshape(B, Nq, nb, Bq, D)
        dk = self.zeros_like(k)
        dv = self.zeros_like(v)
        for lo, hi in key_spans(nb, self.spans, S):
            keys = hi * Bq
            if keys > S:
                keys = S
            ks, vs = k[:, :, :keys], v[:, :, :keys]
            km, sl = key_mask[:, :keys], slots[:keys]
            dks = self.zeros_like(ks)
            dvs = self.zeros_like(vs)
            j = blocks[0] + lo
            while j < hi:
                idx = j * Bq + first
                qg = self._rows(q, idx, Nk)                                     # (B, Nk, n, D)
                p = self._probs(qg, ks, km, idx, sl)                            # (B, Nk, n, K)
                dog = self._rows(dout, idx, Nk)
                dvs = dvs + self.bmm_tn(p.astype(v.dtype), dog)                 # P^T dO
                dp = self.bmm_nt(dog, vs).astype(ms.float32)
                # dS / scale; the scale goes on the (n, D) and (K, D) products, not the dS
                ds = (p * (dp - self._rows(delta, idx, Nk))).astype(q.dtype)
                dq = dq + self._place(blocks, j,
                                      (self.bmm(ds, ks) * self.scale).reshape(B, Nq, Bq, D))
                dks = dks + self.bmm_tn(ds, qg) * self.scale
                j = j + 1
            if keys < S:
                pad = ops.zeros((B, Nk, S - keys, D), k.dtype)
                dks, dvs = ops.concat((dks, pad), 2), ops.concat((dvs, pad), 2)
            dk = dk + dks
            dv = dv + dvs
        return (dq.reshape(B, Nq, Sq, D), dk, dv, self.zeros_like(key_mask),
                self.zeros_like(slots), self.zeros_like(first), self.zeros_like(blocks))


class BlockedCausalAttention(nn.Cell):
    """Causal self-attention of a long row in blocks of ``block`` queries, each block's
    probabilities recomputed in the backward, so neither pass holds an (S, S) tensor or bias:
    the largest tensors are one block's (B, Nq, block, S) float32 scores and probabilities,
    the block shrunk on long rows to stay within ``scores`` query-key pairs (:func:`query_block`).

    q (B, Nq, S, D), k/v (B, Nk, S, D) at slots 0..S-1, key_mask (B, S) (1 = a real token)
    -> (B, Nq, S, D), equal to ``attention_portable`` with the bias of
    ``Qwen2ForCausalLM.attn_bias`` (GQA grouped the same way; a query with no key allowed
    averages the keys of its run of blocks, padding either way). The query blocks run in
    ``KEY_SPANS`` runs (:func:`key_spans`), one graph loop each (static shapes in a loop): a
    run's blocks score only the keys up to its last block's, the later ones being masked for
    all its queries, so 2 runs score 3/4 of the (S, S) pairs and 4 runs 5/8 (a row of 1,040
    tokens, 8 rows, 2 heads: forward + backward 0.85-0.89x the CPU time of scoring every key
    with 2 runs, 0.80-0.92x with 4; each run keeps its own block buffers, so the RL step's peak
    RSS at 1,024-token responses rose 0.26 GB with 2 runs and 0.79 GB with 4). The queries are padded
    to a whole number of blocks (the padding's outputs are dropped).
    """

    def __init__(self, scale: float, block: int, scores: int = BLOCK_SCORES):
        super().__init__()
        self.block = block
        self.scores = scores
        self.blocks = _QueryBlocks(scale)

    def construct(self, q, k, v, key_mask):
        B, Nq, S, D = q.shape
        bq = query_block(self.block, S, self.scores)
        nb = (S + bq - 1) // bq
        pad = nb * bq - S
        if pad > 0:
            q = ops.concat((q, ops.zeros((B, Nq, pad, D), q.dtype)), 2)
        o = self.blocks(q, k, v, key_mask.astype(ms.float32),
                        ops.arange(0, S, 1, dtype=ms.int32),
                        ops.arange(0, bq, 1, dtype=ms.int32),
                        ops.arange(0, nb, 1, dtype=ms.int32))
        if pad > 0:
            o = o[:, :, :S]
        return o

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
    query_block: int = QUERY_BLOCK


PORTABLE = Kernels("portable", rms_norm_portable, rope_portable, attention_portable,
                   swiglu_portable, long_rows=LONG_ROWS, query_block=QUERY_BLOCK)
FUSED = Kernels("ascend-fused", rms_norm_fused, rope_fused, attention_fused, swiglu_fused)


def select_kernels(device_target: str | None = None) -> Kernels:
    """The kernel set for ``device_target`` (default: the current MindSpore context)."""
    target = device_target or ms.get_context("device_target")
    return FUSED if str(target).lower() == "ascend" else PORTABLE
