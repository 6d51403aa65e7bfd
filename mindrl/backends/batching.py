"""Micro-batches of a mini-batch: by count (``train.micro_batch_size``) or by a token budget
(``train.max_tokens_per_micro_batch``).

The loss of every micro-batch is divided by the GLOBAL normalisers of its mini-batch
(:class:`mindrl.types.LossNormalizers`), so how the rows are cut into micro-batches never
changes the summed gradient, only the float summation order, how much padding each forward
carries and how many forwards run.

By count, on a backend that pads each micro-batch only to its own longest row (torch:
``trims_micro_batches``), rows are sorted by length (longest first) before they are cut, so
the short responses of a mixed batch share micro-batches instead of each being padded to a
long one. A backend that pads every micro-batch of a step to one compiled shape (MindSpore)
gains nothing from that and keeps the row order, as do packed micro-batches
(``train.padding_free``: no padding to save, and sorting would put the longest rows in one
pack, whose dense block-diagonal mask grows with the square of its length).

By token budget, rows go longest first and a micro-batch takes rows while its cost stays
within the budget: padded, cost = rows x the longest row (every row is padded to it); packed
(``train.padding_free``), cost = the sum of the rows' tokens. A row longer than the budget on
its own gets a micro-batch of its own. A backend that pads to compiled shapes passes each row's
padded length (MindSpore: ``budget_lengths``, prompt bucket + response bucket), so the budget
bounds what it really runs.

Losses with a statistic across rows (clip_cov, kl_cov) get their token choice from the whole
mini-batch (``TrainBatch.cov_picked``, :func:`mindrl.trainer.rl.select_tokens`), so it too does
not depend on the cut.
"""

from __future__ import annotations

from typing import List

import numpy as np


def micro_batch_rows(lengths: np.ndarray, *, count: int, max_tokens: int = 0,
                     packed: bool = False, by_length: bool = True) -> List[np.ndarray]:
    """Row indices of each micro-batch. ``lengths`` (B,) = prompt + response tokens of each
    row; ``max_tokens`` 0 = ``count`` rows at a time, longest first (``by_length``) or in row
    order. Each micro-batch lists its rows in ascending order."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")          # longest first; ties keep row order
    if max_tokens <= 0:
        count = max(1, count)
        if not by_length:
            order = np.arange(len(lengths))
        return [np.sort(order[s:s + count]) for s in range(0, len(order), count)]
    out: List[List[int]] = []
    cur: List[int] = []
    longest = total = 0
    for i in order:
        n = int(lengths[i])
        if cur:
            cost = total + n if packed else (len(cur) + 1) * max(longest, n)
            if cost > max_tokens:
                out.append(cur)
                cur, longest, total = [], 0, 0
        cur.append(int(i))
        longest, total = max(longest, n), total + n
    if cur:
        out.append(cur)
    return [np.array(sorted(c), dtype=np.int64) for c in out]
