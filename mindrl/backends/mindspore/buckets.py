"""Static shapes for compiled functions: length buckets, and batches re-padded to
(rows, prompt bucket, response bucket), prompts further left and responses further right,
so a run compiles each function once per bucket pair, never once per batch."""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from mindrl.types import TokenBatch


def default_buckets(limit: int, smallest: int = 16) -> List[int]:
    """Powers of two from ``smallest`` up to and including ``limit``."""
    out, b = [], smallest
    while b < limit:
        out.append(b)
        b *= 2
    return out + [int(limit)]


def repad(batch: TokenBatch, rows: int, prompt_len: int, response_len: int,
          pad_id: int = 0) -> TokenBatch:
    """Pad a TokenBatch to ``rows`` x (``prompt_len`` + ``response_len``): prompts further left,
    responses further right, extra rows all padding (empty response mask)."""
    B, P, T = len(batch), batch.prompt_len, batch.response_len
    if B > rows or P > prompt_len or T > response_len:
        raise ValueError(f"batch {B}x({P}+{T}) exceeds the padded shape "
                         f"{rows}x({prompt_len}+{response_len})")
    S = prompt_len + response_len
    ids = np.full((rows, S), pad_id, np.int64)
    att = np.zeros((rows, S), np.int64)
    rmask = np.zeros((rows, response_len), np.float32)
    lo = prompt_len - P
    ids[:B, lo:lo + P + T] = batch.input_ids
    att[:B, lo:lo + P + T] = batch.attention_mask
    rmask[:B, :T] = batch.response_mask
    routing = None
    if batch.routing is not None:                  # replayed expert choices: -1 = native
        routing = np.full((rows, S) + batch.routing.shape[2:], -1, np.int16)
        routing[:B, lo:lo + P + T] = batch.routing
    return TokenBatch(ids, att, rmask, prompt_len, routing)


def pad2(x: Optional[np.ndarray], rows: int, cols: int) -> np.ndarray:
    """``x`` (or zeros when None) zero-padded to (rows, cols) float32."""
    out = np.zeros((rows, cols), np.float32)
    if x is not None:
        out[:x.shape[0], :x.shape[1]] = x
    return out


def trim_response(batch: TokenBatch, T: int) -> TokenBatch:
    """``batch`` with its response columns cut to the first ``T`` (all padding after them)."""
    if T >= batch.response_len:
        return batch
    S = batch.prompt_len + T
    routing = None if batch.routing is None else batch.routing[:, :S]
    return TokenBatch(batch.input_ids[:, :S], batch.attention_mask[:, :S],
                      batch.response_mask[:, :T], batch.prompt_len, routing)


def budget_rows(rows: int, length: int, budget: int) -> int:
    """Rows a token-budget micro-batch of ``rows`` rows of padded ``length`` is padded to: the
    next power of two, at most what the budget holds (and never fewer than ``rows``), so a run
    compiles few row counts per length bucket."""
    cap = max(rows, budget // max(1, length))
    r = 1
    while r < rows:
        r *= 2
    return min(r, cap)


def cache_growth(prompt_bucket: int, max_new_tokens: int, response_buckets: List[int],
                 first: int) -> List[int]:
    """The KV-cache sizes (slots) a decode of up to ``max_new_tokens`` grows through: prompt
    bucket + each response bucket from the one holding ``first`` tokens (at most the full
    one) up to the one holding ``max_new_tokens``. ``first`` <= 0: the full size alone."""
    from mindrl.types import bucket

    full = bucket(max_new_tokens, response_buckets)
    if first <= 0:
        return [prompt_bucket + full]
    start = bucket(min(first, full), response_buckets)
    return [prompt_bucket + r for r in sorted(response_buckets) if start <= r <= full]
