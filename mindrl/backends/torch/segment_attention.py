"""Attention of a packed row, one sequence at a time (``train.padding_free`` with SDPA).

A packed row holds B sequences end to end, N = sum_i n_i tokens. transformers' SDPA path turns
the restarting position ids into a block-diagonal causal (1, 1, N, N) mask and runs one
attention over the whole row: N^2 scores per head (the blocks off the diagonal computed and
then masked) and an N x N mask built per forward, where the sequences need sum_i n_i^2 / 2.
For B equal rows that is 2B times the work, and it grows with the square of the micro-batch's
tokens, not of each sequence's length.

Here the packed forward runs inside :func:`segments`: the mask builder registered with
``ATTENTION`` returns no mask, and the forward passes the sequences' lengths
(``SEGMENTS_KWARG``, Python ints), which transformers hands on to the attention function; that
function runs SDPA causally on each sequence's slice and concatenates the outputs. Outside
:func:`segments` both are transformers' SDPA and mask unchanged, so the model's other forwards
(padded scoring, generation) are untouched. The lengths travel with the forward's keyword
arguments, so a gradient-checkpointed layer recomputes with them.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Sequence

ATTENTION = "mindrl_segment_sdpa"
SEGMENTS_KWARG = "mindrl_segments"
_PACKED = contextvars.ContextVar("mindrl_packed_forward", default=False)


def segment_mask(*args, **kwargs):
    """The mask builder of :data:`ATTENTION`: none inside :func:`segments`, else SDPA's."""
    from transformers.masking_utils import sdpa_mask

    return None if _PACKED.get() else sdpa_mask(*args, **kwargs)


@contextlib.contextmanager
def segments(lengths: Sequence[int]):
    """A packed forward of sequences of ``lengths``: yields the keyword arguments to add to the
    model's call; no mask is built while it is open."""
    token = _PACKED.set(True)
    try:
        yield {SEGMENTS_KWARG: tuple(int(n) for n in lengths)}
    finally:
        _PACKED.reset(token)


def segment_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0,
                 scaling=None, **kwargs):
    """query (1, Hq, N, D), key / value (1, Hk, N, D) -> ((1, N, Hq, D), None): causal
    attention within each sequence of ``kwargs[SEGMENTS_KWARG]`` (lengths summing to N), or
    transformers' SDPA when the lengths are absent."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    lengths = kwargs.pop(SEGMENTS_KWARG, None)
    if lengths is None and _PACKED.get():
        raise RuntimeError(f"a packed forward reached attention without {SEGMENTS_KWARG} (a "
                           "model that does not pass its keyword arguments on to attention)")
    if lengths is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    if attention_mask is not None or query.shape[0] != 1 or query.shape[2] != sum(lengths):
        raise ValueError(f"{SEGMENTS_KWARG}: a packed row (batch 1, no mask) of "
                         f"{sum(lengths)} tokens expected, got query {tuple(query.shape)} and "
                         f"a mask {'given' if attention_mask is not None else 'absent'}")
    kwargs.pop("is_causal", None)
    outs, start = [], 0
    for n in lengths:
        sl = slice(start, start + n)
        o, _ = sdpa_attention_forward(module, query[:, :, sl], key[:, :, sl], value[:, :, sl],
                                      None, dropout=dropout, scaling=scaling, is_causal=True,
                                      **kwargs)
        outs.append(o)
        start += n
    return torch.cat(outs, dim=1), None


def use_segment_attention(model) -> bool:
    """Switch ``model`` (transformers, SDPA attention) to :data:`ATTENTION` (registered once);
    True when it runs it (already or now), False for another attention (eager, flash-attention:
    those keep transformers' packed handling) or a model with sliding-window layers."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    impl = getattr(model.config, "_attn_implementation", None)
    if impl == ATTENTION:
        return True
    if impl != "sdpa" or "sliding_attention" in (getattr(model.config, "layer_types", None)
                                                 or ()):
        return False                # sliding windows: transformers' mask builder keeps them
    AttentionInterface.register(ATTENTION, segment_sdpa)
    AttentionMaskInterface.register(ATTENTION, segment_mask)
    model.set_attn_implementation(ATTENTION)
    return model.config._attn_implementation == ATTENTION
