"""How many tokens one chunk of the LM head holds (``train.logprob_chunk_tokens``), for every
backend that computes log-probs from the final hidden states a chunk at a time (torch:
``backends/torch/chunked_head.py``, MindSpore: ``backends/mindspore/chunked_head.py``)."""

from __future__ import annotations

# (c, V) float32 tensors one chunk holds at once in its backward (logits, log-softmax, softmax,
# entropy terms and their gradients): the auto chunk keeps them within HEAD_BUDGET_BYTES
LIVE_COPIES = 8
# MindSpore on CPU: the per-chunk forward and gradient graphs each keep their own buffers, ~11 MB
# per chunk token at V = 151,936 (measured: 0.77 / 0.93 / 1.65 GB at chunks of 32 / 48 / 110)
MINDSPORE_LIVE_COPIES = 20
# MindSpore keeps one chunk's tempered float32 logits per scored token when it keeps them for
# the backward (whatever the loss: its backward redoes the softmax, entropy and KL from them)
MINDSPORE_KEPT_COPIES = 1
HEAD_BUDGET_BYTES = 512 * 2 ** 20
# torch's fused log-prob path runs its element-wise passes over the kept logits this many float32
# bytes of rows at a time (two such blocks in the forward, one in the backward), in cache
HEAD_BLOCK_BYTES = 2 << 20
MIN_CHUNK = 16


def chunk_tokens(setting: int, vocab: int, budget_bytes: int = HEAD_BUDGET_BYTES,
                 live_copies: int = LIVE_COPIES) -> int:
    """Tokens per chunk for ``train.logprob_chunk_tokens`` = ``setting``: 0 = off (the full
    path), > 0 as given, -1 = automatic: as many tokens as keep ``live_copies`` (c, V) float32
    tensors within ``budget_bytes`` (at V = 151,936: 110 tokens with torch's 8, ~67 MB each;
    44 with MindSpore's 20)."""
    if setting >= 0:
        return setting
    return max(MIN_CHUNK, budget_bytes // (live_copies * 4 * vocab))


def saved_copies(grad_entropy: bool, truncated: bool, teacher: bool,
                 fused_bytes: int = 0) -> float:
    """(c, V) float32 tensors the torch chunked head counts as kept per token for the backward
    when it does not recompute a chunk. The plain loss (none of the three below) with
    ``fused_bytes`` > 0 runs the fused log-prob path, which keeps only the logits in the head's
    dtype (``fused_bytes`` per element): 1 copy in float32, 0.5 in bfloat16 (measured,
    bench/chunked_head_memory.py). Without it, 2: the log-softmax output (plus its float32
    cast's input when the head is in a lower precision). A differentiable entropy, the
    rollout's truncation mask or a teacher's exact KL keep more (counted as
    :data:`LIVE_COPIES`)."""
    if grad_entropy or truncated or teacher:
        return LIVE_COPIES
    return fused_bytes / 4 if fused_bytes > 0 else 2


def recomputes_chunks(tokens: int, chunk: int, vocab: int, copies: float,
                      budget_bytes: int = HEAD_BUDGET_BYTES) -> bool:
    """With gradients, whether a chunked head recomputes each chunk's logits in the backward
    (True) or keeps what its backward needs of every chunk from the forward (False; torch: the
    log-softmax or the fused path's logits, :func:`saved_copies`; MindSpore: the logits,
    :data:`MINDSPORE_KEPT_COPIES`): it recomputes
    when the ``tokens`` scored tokens span more than one ``chunk`` and keeping ``copies``
    float32 (tokens, ``vocab``) tensors would exceed half of ``budget_bytes`` (the other half
    is one chunk's backward working set)."""
    return tokens > chunk > 0 and tokens * vocab * 4 * copies > budget_bytes // 2
