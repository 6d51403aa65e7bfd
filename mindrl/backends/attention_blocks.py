"""Sizes of MindSpore's blocked causal attention (the portable CPU kernels,
:class:`mindrl.backends.mindspore.kernels.BlockedCausalAttention`), in plain Python: the kernel
and the memory plan (which imports no mindspore) read the same numbers."""

LONG_ROWS = 1024    # portable path: longer rows attend in query blocks (BlockedCausalAttention)
QUERY_BLOCK = 128   # measured at 8K: the attention adds ~0.3 GB (512: ~0.85 GB), same speed
# query-key pairs of one block at most: blocks of QUERY_BLOCK up to 5,120 keys, halved per
# doubling past it (down to 16), so one block's buffers stay the same size on longer rows
# (8K rows: blocks of 64, ~0.15 GB less than 128 at ~10% more time; 64 on 1.5K rows: ~35% slower)
BLOCK_SCORES = 128 * 5120


def query_block(block: int, keys: int, scores: int = BLOCK_SCORES) -> int:
    """Queries per block of the blocked attention on a row of ``keys`` slots: ``block``, halved
    (at most three times, not below 16) while one block would score more than ``scores``
    query-key pairs. Plain ``if``s on constants: it runs inside compiled graphs."""
    bq = block
    if bq > 16 and bq * keys > scores:
        bq = bq // 2
    if bq > 16 and bq * keys > scores:
        bq = bq // 2
    if bq > 16 and bq * keys > scores:
        bq = bq // 2
    return bq
