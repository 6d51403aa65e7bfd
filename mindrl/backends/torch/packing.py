"""Padding-free scoring for the torch backend: the rows of a micro-batch packed into one row.

A :class:`~mindrl.types.TokenBatch` holds B rows of ``[left pad | prompt | response | right
pad]``; with mixed response lengths most of its (B, P+T) cells can be padding. Packed, the
real tokens of all rows sit end to end in one row of L = sum_i (p_i + r_i) tokens::

    input_ids    (1, L)   prompt_0 response_0 prompt_1 response_1 ...
    position_ids (1, L)   0 .. p_0+r_0-1      0 .. p_1+r_1-1      ...

Position ids that restart at 0 are how transformers marks packed sequences: with
``attention_mask=None`` its mask builder (``find_packed_sequence_indices``) turns the restarts
into a block-diagonal causal mask, so no token attends across rows (eager and SDPA on any
device; flash-attention's varlen kernels read the same position ids). Only the N = sum_i r_i
positions that predict a response token reach the LM head (``logits_to_keep`` as an index
tensor), and :func:`unpack` scatters per-token values back into the (B, T) layout that the
losses read, zeros at padding, so the padded and packed paths feed the loss the same numbers.

With ``train.logprob_chunk_tokens`` (automatic by default) and more scored tokens than one
chunk, both layouts keep the final hidden states instead of logits and the head runs chunk by
chunk (:mod:`mindrl.backends.torch.chunked_head`): the same numbers, O(chunk x V) memory.

Without packing, :func:`trim_tokens` drops the columns that are padding in every row of a
micro-batch (a micro-batch of short responses no longer pays for the batch's longest row).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch

from mindrl.types import TokenBatch, TrainBatch

log = logging.getLogger("mindrl.torch")
_NOTED = set()          # full-path reasons already logged


@dataclass
class Packed:
    input_ids: torch.Tensor      # (1, L) int64, the real tokens of every row, end to end
    position_ids: torch.Tensor   # (1, L) int64, 0 at each row's first token
    keep: torch.Tensor           # (N,) int64, packed positions whose logits predict a response token
    targets: torch.Tensor        # (N,) int64, the response token each kept position predicts
    rows: torch.Tensor           # (N,) int64, its row in the (B, T) layout
    cols: torch.Tensor           # (N,) int64, its column (response index t)
    shape: Tuple[int, int]       # (B, T)
    lengths: Tuple[int, ...] = ()  # tokens of each packed sequence, in order (sum = L)


def pack(batch: TokenBatch, device) -> Packed:
    """Pack ``batch`` (left-padded prompts, right-padded responses) into one row."""
    P, T, B = batch.prompt_len, batch.response_len, len(batch)
    att = batch.attention_mask.astype(bool)
    ids, pos, keep, targets, rows, cols, lengths = [], [], [], [], [], [], []
    start = 0
    for i in range(B):
        prompt = batch.input_ids[i, :P][att[i, :P]]
        r = int(att[i, P:].sum())                 # right-padded: the first r are real
        seq = np.concatenate([prompt, batch.input_ids[i, P:P + r]])
        if len(seq) == 0:
            continue
        ids.append(seq)
        lengths.append(len(seq))
        pos.append(np.arange(len(seq)))
        p = len(prompt)
        t = np.arange(r)
        keep.append(start + p - 1 + t)            # logits at p-1+t predict response token t
        targets.append(batch.input_ids[i, P + t])
        rows.append(np.full(r, i))
        cols.append(t)
        start += len(seq)
    cat = lambda xs: torch.from_numpy(np.concatenate(xs).astype(np.int64)).to(device)  # noqa: E731
    return Packed(cat(ids)[None], cat(pos)[None], cat(keep), cat(targets), cat(rows), cat(cols),
                  (B, T), tuple(lengths))


@contextlib.contextmanager
def forward_inputs(model, packed: Packed):
    """The model's inputs for a packed row, for a call inside the context. With SDPA attention
    each sequence attends within its own slice (:mod:`mindrl.backends.torch.segment_attention`:
    no N x N mask, sum_i n_i^2 scores instead of N^2); otherwise no mask, and transformers
    derives the block-diagonal causal mask from the restarting position ids."""
    from mindrl.backends.torch import segment_attention as sa

    kw = {"input_ids": packed.input_ids, "position_ids": packed.position_ids,
          "attention_mask": None}
    if packed.lengths and sa.use_segment_attention(model):
        with sa.segments(packed.lengths) as extra:
            yield {**kw, **extra}
    else:
        yield kw


def packed_logits(model, packed: Packed, temperature: float, hidden=None,
                  backend=None) -> torch.Tensor:
    """(N, V) float32 logits / temperature at the kept positions (one forward over the packed
    row, each sequence attending within itself: :func:`forward_inputs`).
    ``hidden``: the model's head; then the (N, H) final hidden states, the head bypassed.
    ``backend``: keeps the MoE load-balancing term of a training forward of its policy."""
    from mindrl.backends.torch.chunked_head import head_bypassed

    extra = backend._moe_forward_kwargs(model) if backend is not None else {}
    with head_bypassed(hidden) if hidden is not None else contextlib.nullcontext(), \
            forward_inputs(model, packed) as inputs:
        out = model(**inputs, use_cache=False, logits_to_keep=packed.keep, **extra)
    if extra:
        backend._keep_balance_term(out, None)
    if hidden is not None:
        return out.logits[0]
    logits = out.logits[0].float()
    return logits / (temperature if temperature > 0 else 1.0)


def packed_truncated(backend, logits: torch.Tensor, packed: Packed, truncated: bool
                     ) -> torch.Tensor:
    """(N, V) ``logits`` under the rollout's truncation when ``truncated`` (targets kept)."""
    from mindrl.backends.torch.truncation import truncated_logits

    return truncated_logits(logits, backend.truncation if truncated else None, packed.targets)


def packed_token_logp(logits: torch.Tensor, packed: Packed) -> torch.Tensor:
    """(N,) log p of each response token under its logits."""
    return torch.gather(torch.log_softmax(logits, dim=-1), -1,
                        packed.targets.unsqueeze(-1)).squeeze(-1)


def unpack(values: torch.Tensor, packed: Packed) -> torch.Tensor:
    """(N,) per-token values -> (B, T), zeros at padding (differentiable)."""
    out = values.new_zeros(packed.shape)
    return out.index_put((packed.rows, packed.cols), values)


def head_chunk(backend, model, tokens: int):
    """(head, tokens per chunk) when ``model``'s head runs in chunks over ``tokens`` scored
    tokens (``train.logprob_chunk_tokens``), else (None, 0): the full path, for a setting of 0,
    a head :func:`~mindrl.backends.torch.chunked_head.plain_head` refuses (logged once), or
    tokens that fit one chunk."""
    from mindrl.backends.torch.chunked_head import chunk_tokens, plain_head

    setting = backend.cfg.train.logprob_chunk_tokens
    if setting == 0:
        return None, 0
    head, why = plain_head(model, getattr(backend, "fsdp", False))
    if head is None:
        if why not in _NOTED:
            _NOTED.add(why)
            log.info("train.logprob_chunk_tokens: log-probs use full-vocabulary logits (%s)",
                     why)
        return None, 0
    chunk = chunk_tokens(setting, head.out_features)
    return (head, chunk) if tokens > chunk else (None, 0)


def _truncate(trunc):
    """The (c, V) truncation callable of :func:`chunked_head.token_stats` (None: untruncated)."""
    if trunc is None:
        return None
    from mindrl.backends.torch.truncation import truncated_logits

    return lambda z, targets: truncated_logits(z, trunc, targets)


def logp_and_entropy(model, batch: TokenBatch, temperature: float, ops,
                     entropy: Optional[str] = "no_grad", truncation=None, backend=None
                     ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """(B, T) log-probs and token entropies of the response tokens, computed packed.
    ``entropy``: "grad" (differentiable), "no_grad" (a metric) or None (not computed).
    ``backend``: its ``train.logprob_chunk_tokens`` decides whether the head runs in chunks
    (:func:`head_chunk`); None: the full path."""
    from algorithms.entropy import entropy_from_logits

    device = next(model.parameters()).device
    packed = pack(batch, device)
    if packed.keep.numel() == 0:
        zero = torch.zeros(packed.shape, device=device)
        if backend is not None and backend._moe_forward_kwargs(model):
            backend._aux_loss = zero.sum()    # no scored token: the pre-pass skipped it too
        return zero, (zero if entropy else None)
    from mindrl.backends.torch.truncation import truncated_logits

    head, chunk = (None, 0) if backend is None else head_chunk(backend, model,
                                                               packed.keep.numel())
    if head is not None:
        from mindrl.backends.torch.chunked_head import token_stats

        hid = packed_logits(model, packed, temperature, hidden=head, backend=backend)
        logp, ent, _ = token_stats(hid, head, packed.targets, temperature=temperature,
                                   chunk=chunk, ops=ops, entropy=entropy,
                                   truncate=_truncate(truncation))
        return unpack(logp, packed), (None if ent is None else unpack(ent, packed))

    logits = truncated_logits(packed_logits(model, packed, temperature, backend=backend),
                              truncation,
                              packed.targets)
    logp = unpack(packed_token_logp(logits, packed), packed)
    ent = None
    if entropy == "grad":
        ent = unpack(entropy_from_logits(ops, logits), packed)
    elif entropy == "no_grad":
        with torch.no_grad():
            ent = unpack(entropy_from_logits(ops, logits.detach()), packed)
    return logp, ent


# --------------------------------------------------------------------------- trimming
def trim_tokens(batch: TokenBatch) -> TokenBatch:
    """Drop the left prompt columns and right response columns that are padding in every row
    (at least one response column stays). Positions are unchanged: they count real tokens."""
    P, att = batch.prompt_len, batch.attention_mask
    prompt_real = att[:, :P].any(axis=0)
    lo = int(np.argmax(prompt_real)) if prompt_real.any() else P
    resp_real = att[:, P:].any(axis=0)
    T = max(1, int(np.nonzero(resp_real)[0].max()) + 1 if resp_real.any() else 1)
    if lo == 0 and T == batch.response_len:
        return batch
    return TokenBatch(batch.input_ids[:, lo:P + T], att[:, lo:P + T],
                      batch.response_mask[:, :T], P - lo,
                      None if batch.routing is None else batch.routing[:, lo:P + T])


def trim_train(mb: TrainBatch) -> TrainBatch:
    """:func:`trim_tokens` on a :class:`TrainBatch`, its (B, T) arrays cut to match."""
    tokens = trim_tokens(mb.tokens)
    T = tokens.response_len
    if T == mb.tokens.response_len:
        return dataclasses.replace(mb, tokens=tokens)
    # every other field is a (B, T) array or None: cut them all (a field added later included)
    cut = {f.name: getattr(mb, f.name)[:, :T] for f in dataclasses.fields(mb)
           if f.name != "tokens" and getattr(mb, f.name) is not None}
    return dataclasses.replace(mb, tokens=tokens, **cut)


def pad_columns(a: np.ndarray, T: int) -> np.ndarray:
    """(B, t) -> (B, T) with zeros on the right."""
    return a if a.shape[1] == T else np.pad(a, ((0, 0), (0, T - a.shape[1])))


def score(backend, model, batch: TokenBatch, temperature: float,
          entropy: Optional[str], truncated: bool = False
          ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The backend's hook: (B, t) log-probs [and entropies] of ``batch`` (already trimmed),
    packed when ``train.padding_free``, else through the backend's padded forward;
    ``truncated``: under the rollout's top-k / min-p / top-p (``backend.truncation``)."""
    trunc = backend.truncation if truncated else None
    if backend.cfg.train.padding_free:
        return logp_and_entropy(model, batch, temperature, backend.ops, entropy, trunc,
                                backend=backend)
    from algorithms.entropy import entropy_from_logits

    B, T = len(batch), batch.response_len
    head, chunk = head_chunk(backend, model, B * T)
    if head is not None:
        from mindrl.backends.torch.chunked_head import token_stats

        hid = backend._response_logits(model, batch, temperature, hidden=head)
        logp, ent, _ = token_stats(hid.reshape(B * T, -1), head,
                                   _targets(backend, batch).reshape(-1),
                                   temperature=temperature, chunk=chunk, ops=backend.ops,
                                   entropy=entropy, truncate=_truncate(trunc))
        return logp.view(B, T), (None if ent is None else ent.view(B, T))

    from mindrl.backends.torch.truncation import truncated_logits

    logits = truncated_logits(backend._response_logits(model, batch, temperature), trunc,
                              _targets(backend, batch))
    logp = backend._token_logp(logits, batch)
    ent = None
    if entropy == "grad":
        ent = entropy_from_logits(backend.ops, logits)
    elif entropy == "no_grad":
        with torch.no_grad():
            ent = entropy_from_logits(backend.ops, logits.detach())
    return logp, ent


def _targets(backend, batch: TokenBatch) -> torch.Tensor:
    """(B, T) int64 response token ids of a padded batch."""
    return torch.from_numpy(batch.input_ids[:, batch.prompt_len:]).to(backend.device)


def score_full_kl(backend, batch: TokenBatch, temperature: float, entropy: Optional[str]
                  ) -> Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor]:
    """:func:`score` of the policy plus the exact per-position reverse KL to the distillation
    teacher (``algorithm.distill.estimator=full``): (B, t) log-probs, [entropies] and
    KL(pi_s || pi_t) (differentiable through the student; 0 at padding), the teacher's logits
    (/ ``teacher_temperature``, no gradient) from the same inputs, packed or padded as the
    policy's."""
    from algorithms.distill import full_reverse_kl
    from algorithms.entropy import entropy_from_logits

    ops, t_temp = backend.ops, backend.cfg.algorithm.distill.teacher_temperature
    if backend.cfg.train.padding_free:
        packed = pack(batch, backend.device)
        if packed.keep.numel() == 0:
            zero = torch.zeros(packed.shape, device=backend.device)
            return zero, (zero if entropy else None), zero
        head, chunk = head_chunk(backend, backend.model, packed.keep.numel())
        t_head = None if head is None else head_chunk(backend, backend.teacher,
                                                      packed.keep.numel())[0]
        if t_head is not None:
            from mindrl.backends.torch.chunked_head import token_stats

            hid = packed_logits(backend.model, packed, temperature, hidden=head,
                                backend=backend)
            with torch.no_grad():
                t_hid = packed_logits(backend.teacher, packed, t_temp, hidden=t_head)
            logp, ent, kl = token_stats(hid, head, packed.targets, temperature=temperature,
                                        chunk=chunk, ops=ops, entropy=entropy,
                                        truncate=_truncate(backend.truncation),
                                        teacher=(t_hid, t_head, t_temp))
            return (unpack(logp, packed), None if ent is None else unpack(ent, packed),
                    unpack(kl, packed))
        logits = packed_truncated(backend, packed_logits(backend.model, packed, temperature,
                                                        backend=backend),
                                  packed, True)
        with torch.no_grad():
            t_logits = packed_logits(backend.teacher, packed, t_temp)
        logp = unpack(packed_token_logp(logits, packed), packed)
        kl = unpack(full_reverse_kl(ops, logits, t_logits), packed)
        to_rows = lambda x: unpack(x, packed)  # noqa: E731
    else:
        from mindrl.backends.torch.truncation import truncated_logits

        B, T = len(batch), batch.response_len
        head, chunk = head_chunk(backend, backend.model, B * T)
        t_head = None if head is None else head_chunk(backend, backend.teacher, B * T)[0]
        if t_head is not None:
            from mindrl.backends.torch.chunked_head import token_stats

            hid = backend._response_logits(backend.model, batch, temperature, hidden=head)
            with torch.no_grad():
                t_hid = backend._response_logits(backend.teacher, batch, t_temp, hidden=t_head)
            logp, ent, kl = token_stats(hid.reshape(B * T, -1), head,
                                        _targets(backend, batch).reshape(-1),
                                        temperature=temperature, chunk=chunk, ops=ops,
                                        entropy=entropy, truncate=_truncate(backend.truncation),
                                        teacher=(t_hid.reshape(B * T, -1), t_head, t_temp))
            return (logp.view(B, T), None if ent is None else ent.view(B, T),
                    kl.view(B, T))
        logits = truncated_logits(backend._response_logits(backend.model, batch, temperature),
                                  backend.truncation, _targets(backend, batch))
        with torch.no_grad():
            t_logits = backend._response_logits(backend.teacher, batch, t_temp)
        logp = backend._token_logp(logits, batch)
        kl = full_reverse_kl(ops, logits, t_logits)
        to_rows = lambda x: x  # noqa: E731
    ent = None
    if entropy == "grad":
        ent = to_rows(entropy_from_logits(ops, logits))
    elif entropy == "no_grad":
        with torch.no_grad():
            ent = to_rows(entropy_from_logits(ops, logits.detach()))
    return logp, ent, kl
