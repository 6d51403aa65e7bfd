"""Response lengths of SFT and preference data: no response is cut without a word.

Responses (SFT targets, DPO/SimPO chosen and rejected, each with its end-of-turn token) longer
than ``data.max_response_len`` tokens are cut to it. Before the first step the trainer encodes
the first ``data.preflight_rows`` rows exactly as its steps do and :func:`check_response_lengths`
logs how many would be cut and the longest; when more than ``data.max_truncated_share`` of them
would be, the run stops with one line naming both keys. Every step counts the rows it cut
(:class:`CutCounter`: the step's ``truncated`` metric and the run's ``truncated/total``, which
the end-of-run summary reports).

The memory plan measures the same rows before anything loads
(:func:`mindrl.memory.data_lengths.measure_data`: the model's tokenizer alone, the rows read and
encoded by the trainers' own ``row_lengths``) and leaves what it measured here
(:mod:`mindrl.data.measured`): the same run's data preflight (prompt lengths) and the check
before the first step take it for those rows instead of encoding them again.
"""

from __future__ import annotations

import logging
from typing import List, Sequence

from mindrl.data.measured import measured

log = logging.getLogger("mindrl.data")


def check_response_lengths(lengths: Sequence[int], cfg, what: str = "rows") -> str:
    """The line saying how many of the checked ``lengths`` (one per row: its longest response,
    in tokens) exceed ``data.max_response_len``; raises :class:`~mindrl.data.io.DataError`
    when their share exceeds ``data.max_truncated_share``."""
    d = cfg.data
    limit = d.max_response_len
    if not lengths:
        return "response lengths: no rows checked"
    long = [n for n in lengths if n > limit]
    longest = max(lengths)
    if len(long) > d.max_truncated_share * len(lengths):
        from mindrl.data.io import DataError

        raise DataError(
            f"data.max_response_len={limit}: {len(long)} of the first {len(lengths)} {what} "
            f"have a response longer than that (longest {longest} tokens) and would be cut, "
            f"more than data.max_truncated_share={d.max_truncated_share:g}; raise "
            f"data.max_response_len (or data.max_truncated_share to train on cut responses)")
    if long:
        return (f"response lengths: {len(long)} of the first {len(lengths)} {what} have a "
                f"response longer than data.max_response_len={limit} (longest {longest} "
                f"tokens) and will be cut to it")
    return (f"response lengths: all of the first {len(lengths)} {what} fit "
            f"data.max_response_len={limit} (longest {longest} tokens)")


def first_rows(stream, n: int) -> List:
    """Up to ``n`` of a training stream's first rows, without moving the stream."""
    import copy

    rows = getattr(stream, "rows", None)
    if isinstance(rows, list):
        return rows[:n]
    if rows is not None:                        # a FileStream: read its first rows
        return rows.get(range(min(len(rows), n)))
    return copy.deepcopy(stream).take(n)        # a generator stream


class CutCounter:
    """Rows cut to ``data.max_response_len``: this step's and the run's (since it started or
    resumed)."""

    def __init__(self):
        self.total = 0

    def metrics(self, cut_this_step: float) -> dict:
        self.total += int(cut_this_step)
        return {"truncated": float(cut_this_step), "truncated/total": float(self.total)}


def check_before_first_step(trainer, response_len, what: str) -> str:
    """Before the first step of an SFT or preference ``trainer``: its first
    ``data.preflight_rows`` rows, each measured by ``response_len(row)`` (tokens, as the steps
    encode it; rows the memory plan measured are not encoded again), checked by
    :func:`check_response_lengths`, whose line is returned for the caller to log. A refusal
    closes what the trainer started (engine, reward workers) and propagates."""
    try:
        rows = first_rows(trainer.train_stream, trainer.cfg.data.preflight_rows)
        known = measured(trainer.kind, trainer.cfg, rows, take=True)
        lengths = [s[1] for _, s in known] if known is not None else \
            [response_len(r) for r in rows]
        return check_response_lengths(lengths, trainer.cfg, what)
    except Exception:
        trainer.close()
        raise

