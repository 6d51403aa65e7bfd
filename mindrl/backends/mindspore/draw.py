"""Drawing the next token from a decode step's float32 logits, on the host in NumPy.

Every row draws by inverse CDF from one uniform ``u`` in [0, 1): the token is the first id
whose cumulative probability exceeds ``u`` (``#{i : C_i <= u * C_V}`` with C the cumulative sums
of the unnormalised weights; an id of weight 0 is never drawn), so a row's token depends only
on its own logits and uniform.

The cumulative sums come in two levels (:func:`inverse_cdf`): float64 sums of blocks of
``BLOCK`` ids (``np.add.reduceat``), their cumulative sums (a few hundred per row at a vocabulary
of 151,936), then the cumulative sums inside the one block the row's target falls in. A plain
float64 ``cumsum`` over the vocabulary was most of the host's time per decode step at real
width (15 ms of 23 ms for 16 rows x 151,936 ids; the whole draw here takes 7 ms in the decode
loop, ``bench/ms_decode_step.py``).

Without truncation (``top_k`` < 1, ``top_p`` = 1, ``min_p`` = 0) :func:`draw` samples from
softmax(logits / T) in five passes over the logits: scale (float32), row max, subtract, exp in
place, block sums. The sampled token's log-prob is (z_tok - max) - log(sum of the weights),
the weights' sum in float64. :func:`greedy` is the argmax, its log-prob at temperature 1.
With truncation the sampler filters a float64 log-softmax (:func:`filter_probs`) and draws
from the filtered probabilities with the same :func:`inverse_cdf`.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

BLOCK = 256   # ids per first-level block of the cumulative sums


def filter_probs(probs: np.ndarray, top_k: int = -1, top_p: float = 1.0,
                 min_p: float = 0.0) -> np.ndarray:
    """(B, V) probabilities -> filtered and renormalised (B, V) (float64).

    The kept set is :func:`algorithms.truncation.keep_mask`'s, the one the trainers score the
    policy under, ties at a threshold included (a top-p cut that falls inside a run of equal
    probabilities keeps the whole run, whatever order a sort puts them in)."""
    from algorithms.truncation import Truncation, keep_mask

    p = probs.astype(np.float64)
    trunc = Truncation(-1 if top_k is None else int(top_k),
                       1.0 if top_p is None else float(top_p), float(min_p or 0.0))
    if trunc.active:
        with np.errstate(divide="ignore"):
            p = np.where(keep_mask(np.log(p), trunc), p, 0.0)
    return p / p.sum(-1, keepdims=True)


def log_softmax64(logits: np.ndarray, inv_temp: float) -> np.ndarray:
    """(B, V) float32 logits -> float64 log-softmax(logits * inv_temp)."""
    z = logits.astype(np.float64) * inv_temp
    z -= z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def block_sums(w: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """(B, V) non-negative weights -> (B, ceil(V / block)) float64 sums of consecutive blocks
    (the last one shorter when ``block`` does not divide V)."""
    return np.add.reduceat(w, np.arange(0, w.shape[-1], block), axis=-1, dtype=np.float64)


def inverse_cdf(w: np.ndarray, u: np.ndarray, sums: np.ndarray | None = None,
                block: int = BLOCK) -> Tuple[np.ndarray, np.ndarray]:
    """(B, V) non-negative weights (any float dtype, rows not normalised), (B,) uniforms in
    [0, 1) -> (tokens (B,) int64, each row's weight total (B,) float64). ``sums``: the
    rows' :func:`block_sums` when already computed.

    The token is ``#{i : C_i <= u * C_V}`` with C the row's cumulative weights (float64): the
    first id whose cumulative weight exceeds the target, never an id of weight 0 (a target
    rounded up to the total takes the last id of positive weight)."""
    B, V = w.shape
    sums = block_sums(w, block) if sums is None else sums
    nb = sums.shape[1]
    cum = np.cumsum(sums, -1)                                          # (B, nb)
    total = cum[:, -1]
    target = np.asarray(u, np.float64).reshape(B) * total
    last = nb - 1 - (sums[:, ::-1] > 0).argmax(-1)          # each row's last block of weight
    blocks = np.minimum((cum <= target[:, None]).sum(-1), last)
    lo = blocks * block                                                # (B,)
    ids = lo[:, None] + np.arange(block)                               # (B, block)
    inside = ids < V                                                   # the last block's tail
    w_b = np.where(inside, w[np.arange(B)[:, None], np.minimum(ids, V - 1)], 0)
    before = np.take_along_axis(cum - sums, blocks[:, None], 1)                    # (B, 1)
    inner = np.cumsum(w_b, -1, dtype=np.float64) + before
    k = (inner <= target[:, None]).sum(-1)
    # rounding put the target past the block's end: its last id of positive weight
    last_id = block - 1 - (w_b[:, ::-1] > 0).argmax(-1)
    tok = lo + np.where(k >= inside.sum(-1), last_id, k)
    return tok, total


def _weights(logits: np.ndarray, inv_temp: float) -> Tuple[np.ndarray, np.ndarray]:
    """(B, V) float32 logits -> (exp(z - max z) float32 (B, V) in a new buffer, max z (B, 1))
    with z = logits * inv_temp in float32."""
    z = np.multiply(logits, np.float32(inv_temp), dtype=np.float32)
    m = z.max(-1, keepdims=True)
    np.subtract(z, m, out=z)
    return np.exp(z, out=z), m


def _logp(logits, tok, inv_temp, m, total) -> np.ndarray:
    rows = np.arange(len(tok))
    z = np.multiply(logits[rows, tok], np.float32(inv_temp), dtype=np.float32) - m[:, 0]
    return z.astype(np.float64) - np.log(total)


def draw(logits: np.ndarray, inv_temp: float, u: np.ndarray,
         block: int = BLOCK) -> Tuple[np.ndarray, np.ndarray]:
    """(B, V) float32 logits, (B,) uniforms -> (tokens (B,) int64, log-probs (B,) float64):
    one sample of each row from softmax(logits * inv_temp) by inverse CDF, and its log-prob
    under that distribution."""
    logits = np.asarray(logits, np.float32)
    e, m = _weights(logits, inv_temp)
    tok, total = inverse_cdf(e, u, block_sums(e, block), block)
    return tok, _logp(logits, tok, inv_temp, m, total)


def greedy(logits: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(B, V) float32 logits -> (argmax (B,) int64, its log-softmax (B,) float64)."""
    logits = np.asarray(logits, np.float32)
    tok = logits.argmax(-1)
    e, m = _weights(logits, 1.0)
    return tok, _logp(logits, tok, 1.0, m, e.sum(-1, dtype=np.float64))
