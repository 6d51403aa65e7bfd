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
HEAD_BUDGET_BYTES = 512 * 2 ** 20
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
