"""The LM head in chunks on the MindSpore backend (``train.logprob_chunk_tokens``): per-token
log-probs, entropies and the exact distillation KL from the final hidden states and the head's
weight, a chunk of scored tokens at a time, and the RL, SFT and preference steps built around
them.

The full path's compiled step builds the (B, T, V) float32 logits of every response token,
their log-softmax and, in the backward, their gradients: at V = 151,936 about 0.6 MB per token
each. Chunks unrolled inside one compiled graph do not help: the graph keeps every chunk's
buffers alive, so its peak grows with T as before. Here each chunk is its own compiled call
from a Python loop, and nothing of one chunk outlives it::

    1. h = decoder(ids)[response positions]            (N, H)  compiled, kept
       (exact KL: the teacher's h_t the same way)      (N, H_t)
    2. for each chunk c of the scored tokens:            compiled per-chunk call
           z_c = h_c W^T / temperature                   (c, V)
           logp_c [, entropy_c] [, KL(z_c || h_t,c W_t^T / t_temp)]   (c,)
    3. loss, dL/d(scores) = step_loss(logp [, entropy] [, KL], ...)   (B, T), compiled
    4. for each chunk c:                                 compiled per-chunk call
           dh_c, dW_c = grad of sum(logp_c dL/dlogp_c [+ entropy_c dL/dentropy_c]
                                    [+ KL_c dL/dKL_c])
           dW += dW_c                                    (one (V, H) accumulator)
    5. decoder backward: grad of sum(h * dh) (+ the MoE load-balancing loss) w.r.t. the
       parameters, dW added to the head's (to the embedding's when tied), into the optimizer's
       accumulator                                       compiled

Step 3 runs the step's own loss on the whole (B, T) scores: every policy loss and aggregation
of ``rl_loss`` (sequence-level ratios, covariance picks), the SFT mean NLL, and the DPO / IPO /
SimPO sequence sums and averages of ``preference_loss`` over the chosen and rejected rows
stacked. The decoder runs twice (1 and 5). When all the scored tokens' (n, V) float32 logits
fit half the head's budget (:func:`keeps_logits`, the torch head's test,
:func:`mindrl.backends.chunking.recomputes_chunks`, on one copy per token), the head runs as
three matrix products over all n rows at once, each one kernel call (n changes from step to
step, so no compiled graph), and only the element-wise work goes in chunks::

    2'. z = h_n W^T / temperature (n, V), kept; per chunk c (compiled): scores of z_c
    4'. per chunk c (compiled): dz_c = the scores' gradient w.r.t. z_c, written over z_c
        dh = dz W (n, H);  dW = dz^T h_n (V, H), passed to step 5 (no accumulator)

so the head's GEMM runs three times per token (forward, input and weight gradient), as
torch's does, with no chunk padding in the products and one (V, H) weight gradient written
once. Otherwise steps 2 and 4 run each chunk's head (four GEMMs per token), as a checkpointed
backward does, and the head's memory stays one chunk's. Chunks are
:func:`balanced_chunk` long: as many as ``chunk`` needs, each the shortest multiple of 8 that
holds them. Only the scored tokens (response mask 1) are chunked;
padding rows and columns cost nothing.

On CPU with float32 weights the same steps run with NumPy in host memory instead
(:mod:`~mindrl.backends.mindspore.host_head`): the head's gradients go straight into the
optimizer's accumulator and step 5 differentiates w.r.t. the input embeddings, so no (V, H)
gradient is built. The compiled chunks here serve bf16 weights, accelerators and the exact
distillation KL.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, ops

from mindrl.backends.chunking import (MINDSPORE_KEPT_COPIES, MINDSPORE_LIVE_COPIES,
                                     chunk_tokens, recomputes_chunks)
from mindrl.backends.mindspore.truncation import truncated_logits_and_logp


# keep the chunks' logits for the backward when they fit (``keeps_logits``); False: always
# recompute them (a benchmark's baseline)
KEEP_CHUNK_LOGITS = True


def keeps_logits(tokens: int, chunk: int, vocab: int) -> bool:
    """Whether the chunked step keeps every chunk's (c, V) float32 logits from the forward for
    its backward (one copy per scored token, :data:`MINDSPORE_KEPT_COPIES`) instead of running
    the head again per chunk: the torch head's test on the same budget."""
    return KEEP_CHUNK_LOGITS and not recomputes_chunks(tokens, chunk, vocab,
                                                       MINDSPORE_KEPT_COPIES)


def head_weight(model) -> Parameter:
    """The (V, H) weight the model's ``head`` multiplies by (the embedding when tied)."""
    return model.model.embed_tokens.weight if model.tied else model.lm_head.weight


CHUNK_GRANULE = 8     # chunk lengths are multiples of this (bounds the compiled shapes)


def balanced_chunk(n: int, chunk: int) -> int:
    """The length of each of the ceil(n / ``chunk``) chunks of ``n`` scored tokens: the
    shortest multiple of :data:`CHUNK_GRANULE` (at most ``chunk``) that holds them, so the
    last chunk pads fewer than a granule per chunk instead of up to a whole chunk (192 tokens
    in chunks of 44: 5 of 40, not 5 of 44). Every compiled chunk graph is one per length: at
    most ``chunk`` / 8 + 1 lengths."""
    if n <= 0:
        return chunk
    k = -(-n // chunk)
    even = -(-n // k)
    return min(chunk, -(-even // CHUNK_GRANULE) * CHUNK_GRANULE)


class TokenChunks:
    """Where one micro-batch's scored tokens sit, in chunks of ``chunk``: ``idx`` (n_chunks *
    chunk,) rows of the flattened (B*T, H) hidden states (the tail padded with row 0),
    ``targets`` their ids, ``valid`` 1 for a scored token, and ``back`` (B*T,) the position of
    each (row, column) among the chunks' outputs (the extra last position: a zero)."""

    def __init__(self, mask: np.ndarray, targets: np.ndarray, chunk: int):
        B, T = mask.shape
        real = np.nonzero(mask.reshape(-1) > 0)[0].astype(np.int32)
        n = len(real)
        self.n_real = n
        self.n_chunks = -(-n // chunk)
        chunk = self.chunk = balanced_chunk(n, chunk)
        pad = self.n_chunks * chunk - n
        self.idx = np.concatenate([real, np.zeros(pad, np.int32)])
        self.targets = targets.reshape(-1)[self.idx].astype(np.int32)
        self.valid = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
        back = np.full(B * T, self.n_chunks * chunk, np.int32)
        back[real] = np.arange(n, dtype=np.int32)
        self.back = Tensor(back)
        self._back_real = np.minimum(back, n)           # rows of (n, ...) outputs, n: a zero
        self.shape = (B, T)

    def spans(self):
        for i in range(self.n_chunks):
            yield slice(i * self.chunk, (i + 1) * self.chunk)

    def inputs(self, s: slice) -> Tuple[Tensor, Tensor]:
        """(rows of the hidden states, target ids) of chunk ``s``."""
        return Tensor(self.idx[s]), Tensor(self.targets[s])

    def per_chunk(self, values: np.ndarray, s: slice) -> Tensor:
        """(B, T) ``values`` at chunk ``s``'s tokens, 0 at its padding."""
        return Tensor((values.reshape(-1)[self.idx[s]] * self.valid[s]).astype(np.float32))

    def real_rows_to_rows(self, x: Tensor) -> Tensor:
        """(n, H) rows of the scored tokens (in order, no padding) back to (B*T, H), 0
        elsewhere."""
        return ops.gather(ops.concat((x, x[:1] * 0), 0), Tensor(self._back_real), 0)

    def to_rows(self, parts: List[Tensor]) -> Tensor:
        """The chunks' outputs ((c,) or (c, H) each) back to (B, T) or (B*T, H), 0 elsewhere."""
        tail = parts[0][:1] * 0 if parts else None
        if tail is None:
            return Tensor(np.zeros(self.shape, np.float32))
        full = ops.gather(ops.concat(parts + [tail], 0), self.back, 0)
        return full.reshape(self.shape) if len(parts[0].shape) == 1 else full


def make_hidden_fn(model, with_aux: bool = False):
    """``fn(ids, pos, att, targets) -> (B*T, H)`` final hidden states at the positions that
    predict the response tokens (``with_aux``: and the router-probability sums (E,), the
    differentiable part of the MoE load-balancing loss), the logits' rows of
    ``model.response_logits``. Not compiled: the caller jits or differentiates it."""
    H = model.spec.hidden_size

    def hidden(ids, pos, att, targets):
        S, T = ids.shape[1], targets.shape[1]
        if with_aux:
            h, sums = model._layers(ids, pos, att, False, True)
            return h[:, S - T - 1:S - 1].reshape(-1, H), sums[1]
        return model.hidden(ids, pos, att)[:, S - T - 1:S - 1].reshape(-1, H)
    return hidden


def _chunk_logits(model, flat_h, idx, tgt, inv_temp, trunc):
    """One chunk: ((1, c, V) tempered logits under the rollout's truncation, (c,) log p)."""
    h_c = ops.gather(flat_h, idx, 0)
    z = model.head(h_c.expand_dims(0)) * inv_temp
    logits, logp = truncated_logits_and_logp(z, tgt.expand_dims(0), trunc)
    return logits, logp.reshape(-1)


def make_logit_scores(trunc, o, entropy: bool, teacher=None):
    """``post(z, t_h_c, tgt, inv_t_temp) -> ((c,) log p [, (c,) entropy] [, (c,) KL])`` of one
    chunk's (1, c, V) tempered logits ``z`` (:func:`make_scores` after the head)."""
    from algorithms.distill import full_reverse_kl
    from algorithms.entropy import entropy_from_logits

    def post(z, t_h_c, tgt, inv_t_temp):
        logits, logp = truncated_logits_and_logp(z, tgt.expand_dims(0), trunc)
        out = (logp.reshape(-1),)
        if entropy:
            out = out + (entropy_from_logits(o, logits).reshape(-1),)
        if teacher is not None:
            t_z = ops.stop_gradient(teacher.head(t_h_c.expand_dims(0)) * inv_t_temp)
            out = out + (full_reverse_kl(o, logits, t_z).reshape(-1),)
        return out
    return post


def make_scores(model, trunc, o, entropy: bool, teacher=None):
    """``scores(h_c, t_h_c, tgt, inv_temp, inv_t_temp) -> ((c,) log p [, (c,) entropy]
    [, (c,) KL])`` of one chunk: log p under the tempered logits masked by the rollout's
    truncation (``trunc``), their entropy, and with ``teacher`` the exact reverse KL
    (:func:`algorithms.distill.full_reverse_kl`) to the teacher's logits of its own hidden rows
    ``t_h_c`` at ``inv_t_temp`` (a constant: no gradient through the teacher)."""
    post = make_logit_scores(trunc, o, entropy, teacher)

    def scores(h_c, t_h_c, tgt, inv_temp, inv_t_temp):
        z = model.head(h_c.expand_dims(0)) * inv_temp                    # (1, c, V)
        return post(z, t_h_c, tgt, inv_t_temp)
    return scores


def make_stats_fn(model, trunc, o, entropy: bool, teacher=None):
    """Compiled ``fn(flat_h, t_flat_h, idx, tgt, inv_temp, inv_t_temp) -> ((c,) log p
    [, (c,) entropy] [, (c,) KL])`` of one chunk (no gradient; :func:`make_scores`).
    ``t_flat_h``: the teacher's (B*T, H_t) hidden states (unused without ``teacher``)."""
    post = make_logit_scores(trunc, o, entropy, teacher)

    def stats(flat_h, t_flat_h, idx, tgt, inv_temp, inv_t_temp):
        t_h_c = ops.gather(t_flat_h, idx, 0) if teacher is not None else t_flat_h
        z = model.head(ops.gather(flat_h, idx, 0).expand_dims(0)) * inv_temp    # (1, c, V)
        return post(z, t_h_c, tgt, inv_t_temp)
    return ms.jit(stats)


def _weighted_sum(with_entropy: bool, with_kl: bool):
    """``f(scores, g_logp, g_ent, g_kl)``: sum(logp g_logp) [+ sum(entropy g_ent)] [+ sum(KL
    g_kl)] of one chunk's scores (log-probs first, the entropy second, the KL last), the
    scalar whose gradient a chunk's backward takes."""

    def weighted(out, g_logp, g_ent, g_kl):
        s = (out[0] * g_logp).sum()
        if with_entropy:
            s = s + (out[1] * g_ent).sum()
        if with_kl:
            s = s + (out[-1] * g_kl).sum()
        return s
    return weighted


def make_grad_fn(model, trunc, o, with_entropy: bool, acc: Optional[Parameter], teacher=None):
    """Compiled ``fn(flat_h, t_flat_h, idx, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp)
    -> (c, H)``: the gradient of sum(logp g_logp [+ entropy g_ent] [+ KL g_kl]) over one chunk
    w.r.t. its hidden rows; the gradient w.r.t. the head's weight is added to ``acc`` (None:
    the head is frozen). The entropy term only with ``with_entropy``, the KL only with
    ``teacher``."""
    scores = make_scores(model, trunc, o, with_entropy, teacher)
    weighted = _weighted_sum(with_entropy, teacher is not None)

    def terms(h_c, t_h_c, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp):
        return weighted(scores(h_c, t_h_c, tgt, inv_temp, inv_t_temp), g_logp, g_ent, g_kl)

    def rows(flat_h, t_flat_h, idx):
        t_h_c = ops.gather(t_flat_h, idx, 0) if teacher is not None else t_flat_h
        return ops.gather(flat_h, idx, 0), t_h_c

    if acc is None:
        grad = ms.grad(terms, 0)

        def chunk_grad(flat_h, t_flat_h, idx, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp):
            h_c, t_h_c = rows(flat_h, t_flat_h, idx)
            return grad(h_c, t_h_c, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp)
    else:
        grad = ms.grad(terms, 0, (head_weight(model),))

        def chunk_grad(flat_h, t_flat_h, idx, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp):
            h_c, t_h_c = rows(flat_h, t_flat_h, idx)
            g_h, g_w = grad(h_c, t_h_c, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp)
            ops.assign_add(acc, g_w[0])
            return g_h
    return ms.jit(chunk_grad)


def make_post_fn(trunc, o, entropy: bool, teacher=None):
    """Compiled ``fn(z, t_flat_h, idx, tgt, inv_t_temp) -> ((c,) log p [, (c,) entropy]
    [, (c,) KL])`` of one chunk's (1, c, V) tempered logits ``z`` (rows of the step's logits,
    :func:`kept_logits`): :func:`make_stats_fn` after the head."""
    post = make_logit_scores(trunc, o, entropy, teacher)

    def stats(z, t_flat_h, idx, tgt, inv_t_temp):
        t_h_c = ops.gather(t_flat_h, idx, 0) if teacher is not None else t_flat_h
        return post(z, t_h_c, tgt, inv_t_temp)
    return ms.jit(stats)


def make_kept_grad_fn(model, trunc, o, with_entropy: bool, teacher=None):
    """Compiled ``fn(z, t_flat_h, idx, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp) ->
    (c, V)``: the gradient dz of sum(logp g_logp [+ entropy g_ent] [+ KL g_kl]) over one
    chunk w.r.t. the head's raw output (through the temperature), from the chunk's kept
    (1, c, V) tempered logits ``z``, float32. :func:`kept_head_grads` turns every chunk's dz
    into the hidden rows' and the weight's gradients."""
    post = make_logit_scores(trunc, o, with_entropy, teacher)
    weighted = _weighted_sum(with_entropy, teacher is not None)

    def terms(z, t_h_c, tgt, g_logp, g_ent, g_kl, inv_t_temp):
        return weighted(post(z, t_h_c, tgt, inv_t_temp), g_logp, g_ent, g_kl)

    grad = ms.grad(terms, 0)

    def kept_grad(z, t_flat_h, idx, tgt, g_logp, g_ent, g_kl, inv_temp, inv_t_temp):
        t_h_c = ops.gather(t_flat_h, idx, 0) if teacher is not None else t_flat_h
        dz = grad(z, t_h_c, tgt, g_logp, g_ent, g_kl, inv_t_temp) * inv_temp    # (1, c, V)
        return dz.reshape(z.shape[1], z.shape[2])
    return ms.jit(kept_grad)


def kept_logits(model, flat_h, layout: "TokenChunks", inv_temp) -> Tuple[Tensor, Tensor]:
    """The scored tokens' hidden rows (n, H) and their tempered float32 logits (n, V): the
    head's matrix product over all n rows at once, no padding (a kernel call, not a compiled
    graph: n changes from step to step)."""
    hs = ops.gather(flat_h, Tensor(layout.idx[:layout.n_real]), 0)
    return hs, model.head(hs.expand_dims(0))[0] * inv_temp


def chunk_of(z: Tensor, layout: "TokenChunks", s: slice) -> Tensor:
    """(1, c, V): chunk ``s``'s rows of the (n, V) logits (or their gradient), the last
    chunk's padding rows zeros."""
    part = z[s.start:min(s.stop, layout.n_real)]
    short = s.stop - s.start - int(part.shape[0])
    if short:
        part = ops.concat((part, ops.zeros((short, int(z.shape[1])), z.dtype)), 0)
    return part.expand_dims(0)


def kept_head_grads(w: Parameter, dz: Tensor, hs: Tensor, trainable: bool):
    """From the (n, V) gradient of the raw logits ``dz`` (every chunk's, in place of the kept
    logits) and the (n, H) hidden rows ``hs``: their gradient dz W (n, H) and the weight's dz^T
    hs (V, H) (None when the head is frozen), each ONE matrix product over all n rows."""
    dz = dz.astype(w.dtype)
    d_h = ops.MatMul()(dz, w)
    d_w = ops.MatMul(transpose_a=True)(dz, hs.astype(w.dtype)) if trainable else None
    return d_h, d_w


def chunk_scores(stats_fn, flat_h, t_flat_h, layout: TokenChunks, inv_temp, inv_t_temp,
                 n_scores: int) -> List[Tensor]:
    """The ``n_scores`` (B, T) scores of :func:`make_scores` (log-probs [, entropies]
    [, KL]) of the scored tokens, chunk by chunk; 0 elsewhere."""
    parts: List[List[Tensor]] = [[] for _ in range(n_scores)]
    for s in layout.spans():
        out = stats_fn(flat_h, t_flat_h, *layout.inputs(s), inv_temp, inv_t_temp)
        for i in range(n_scores):
            parts[i].append(out[i])
    return [layout.to_rows(p) for p in parts]


def kept_chunk_scores(post_fn, z, t_flat_h, layout: TokenChunks, inv_t_temp,
                      n_scores: int) -> List[Tensor]:
    """:func:`chunk_scores` from the step's kept (n, V) tempered logits ``z``
    (:func:`kept_logits`), a chunk of rows at a time (``post_fn``: :func:`make_post_fn`)."""
    parts: List[List[Tensor]] = [[] for _ in range(n_scores)]
    for s in layout.spans():
        out = post_fn(chunk_of(z, layout, s), t_flat_h, *layout.inputs(s), inv_t_temp)
        for i in range(n_scores):
            parts[i].append(out[i])
    return [layout.to_rows(p) for p in parts]


class ChunkedHeadMixin:
    """The backend's chunked head: the chunk decision, the no-grad log-prob pass and the RL
    step's chunked forward / backward (module docstring)."""

    _chunk_notes: set = set()

    def _head_chunk(self, tokens: int, model=None) -> int:
        """Tokens per chunk when ``tokens`` scored positions of ``model`` (the policy by
        default) go through the chunked head, else 0 (``train.logprob_chunk_tokens`` = 0 or
        tokens that fit one chunk)."""
        setting = self.cfg.train.logprob_chunk_tokens
        if setting == 0:
            return 0
        spec = (model or self.model).spec
        chunk = chunk_tokens(setting, spec.vocab_size, live_copies=MINDSPORE_LIVE_COPIES)
        return chunk if tokens > chunk else 0

    def _chunk_fns(self) -> Dict:
        if not hasattr(self, "_chunk_cache"):
            self._chunk_cache = {}
        return self._chunk_cache

    def _chunked_logprobs(self, which: str, model, trunc, inputs, inv_temp, chunk: int):
        """The log-prob pass of ``model`` (``which``: its cache key) with the head in chunks:
        ``inputs`` = (ids, pos, att, targets, mask) -> (B, T) log-probs x mask."""
        from mindrl.backends.mindspore.host_head import host_head_weight, host_logprobs

        cache = self._chunk_fns()
        w = host_head_weight(self, model, head_weight(model))
        if w is not None:           # the head in host memory (host_head)
            key = ("logp-host", which)
            if key not in cache:
                cache[key] = ms.jit(make_hidden_fn(model))
            return host_logprobs(cache[key], w, trunc, inputs, inv_temp, chunk, TokenChunks)
        key = ("logp", which, trunc is not None)
        if key not in cache:
            cache[key] = (ms.jit(make_hidden_fn(model)),
                          make_stats_fn(model, trunc, self.ops, entropy=False))
        hidden_fn, stats_fn = cache[key]
        ids, pos, att, targets, mask = inputs
        layout = TokenChunks(mask.asnumpy(), targets.asnumpy(), chunk)
        flat_h = hidden_fn(ids, pos, att, targets)
        return chunk_scores(stats_fn, flat_h, flat_h, layout, inv_temp, inv_temp, 1)[0] * mask

    def _head_grad_acc(self) -> Optional[Parameter]:
        """The (V, H) accumulator of the head weight's gradient over one micro-batch's chunks
        where each chunk's head runs again in the backward (None when the head is frozen:
        LoRA); made on first use (the step that keeps the logits has no accumulator)."""
        w = head_weight(self.model)
        if not any(p is w for p in self.params):
            return None
        if getattr(self, "_head_acc", None) is None:
            self._head_acc = Parameter(Tensor(np.zeros(w.shape, np.float32), w.dtype),
                                       name="train.head_grad_acc", requires_grad=False)
        return self._head_acc

    def _chunked_step(self, chunk: int, loss_grads, *, entropy: bool = False,
                      ent_grad: bool = False, inv_temp: float = 1.0, trunc=None,
                      aux_coef: float = 0.0, teacher=None, inv_t_temp: float = 1.0):
        """A micro-batch step with the head in chunks (module docstring), shared by the RL,
        SFT and preference steps: ``run(ids, pos, att, targets, mask, loss_args, aux_w) ->
        (loss, metrics)``; the gradient goes into the optimizer's accumulator.

        ``loss_grads(logp [, entropy] [, kl], *loss_args) -> (loss, metrics tuple, dL/dlogp
        [, dL/dentropy] [, dL/dkl])`` is the step's loss on the (B, T) scores and its gradient
        w.r.t. them (compiled; run in PyNative if it does not compile). ``entropy``: the
        entropies are scores (``ent_grad``: with a gradient); ``teacher``: so is the exact
        reverse KL to it (``algorithm.distill.estimator=full``), its hidden states from its own
        compiled forward of the same inputs; ``aux_coef``: the MoE load-balancing loss
        through the decoder backward (``aux_w`` its weights, else unused)."""
        from mindrl.backends.mindspore.host_head import host_head_weight, make_host_step

        model, o = self.model, self.ops
        if host_head_weight(self, model, head_weight(model), teacher) is not None:
            return make_host_step(self, chunk, loss_grads,
                                  (TokenChunks, keeps_logits, make_hidden_fn, head_weight(model)),
                                  entropy=entropy, ent_grad=ent_grad, inv_temp=inv_temp,
                                  trunc=trunc, aux_coef=aux_coef)
        w = head_weight(model)
        trainable = any(p is w for p in self.params)
        hidden = make_hidden_fn(model, with_aux=bool(aux_coef))
        hidden_fn = ms.jit(hidden)
        teacher_fn = ms.jit(make_hidden_fn(teacher)) if teacher is not None else None
        stats_fn = make_stats_fn(model, trunc, o, entropy, teacher)
        recompute = {}                      # the recomputing gradient, made on first use
        # with the logits kept for the backward (keeps_logits): the scores and dz per chunk
        post_fn = make_post_fn(trunc, o, entropy, teacher)
        kept_grad_fn = make_kept_grad_fn(model, trunc, o, ent_grad, teacher)
        vocab = model.spec.vocab_size
        temp, t_temp = Tensor(np.float32(inv_temp)), Tensor(np.float32(inv_t_temp))
        n_scores = 1 + int(entropy) + int(teacher is not None)
        accumulate = self.optimizer.accumulate_in_graph
        params = self.params
        head_at = next((i for i, p in enumerate(params) if trainable and p is w), -1)
        compiled_loss = [ms.jit(loss_grads)]

        def surrogate(ids, pos, att, targets, g_h, aux_w):
            if aux_coef:
                h, psum = hidden(ids, pos, att, targets)
                # this micro-batch's part of the mini-batch's aux (aux_w = E f / R, the pre-pass)
                return (h * g_h).sum() + aux_coef * (psum * aux_w).sum()
            return (hidden(ids, pos, att, targets) * g_h).sum()

        dec_grad = ms.grad(surrogate, None, params)

        @ms.jit
        def backward(ids, pos, att, targets, g_h, aux_w, g_w):
            """The decoder backward into the accumulator, ``g_w`` (V, H) added to the head's
            gradient (unused with a frozen head)."""
            grads = dec_grad(ids, pos, att, targets, g_h, aux_w)
            if head_at >= 0:
                grads = grads[:head_at] + (grads[head_at] + g_w,) + grads[head_at + 1:]
            accumulate(grads)
            return g_h.sum()

        def backward_from_acc(ids, pos, att, targets, g_h, aux_w):
            """``backward`` with the recomputing chunks' accumulator, which it then clears."""
            acc = recompute["acc"]
            backward(ids, pos, att, targets, g_h, aux_w, acc if acc is not None else g_h[:1])
            if acc is not None:
                recompute["zero"](acc)

        def recompute_fns():
            if not recompute:
                acc = self._head_grad_acc()
                recompute.update(acc=acc, grad=make_grad_fn(model, trunc, o, ent_grad, acc,
                                                            teacher))

                def zero(a):
                    ops.assign(a, ops.zeros_like(a))
                    return ops.zeros((), ms.float32)
                recompute["zero"] = ms.jit(zero)
            return recompute

        def loss_and_grads(args):
            from mindrl.backends.mindspore.host_head import loss_with_fallback

            return loss_with_fallback(compiled_loss, loss_grads, args)

        def run(ids, pos, att, targets, mask, loss_args, aux_w):
            layout = TokenChunks(mask.asnumpy(), targets.asnumpy(), chunk)
            out = hidden_fn(ids, pos, att, targets)
            flat_h, aux = (out[0], out[1]) if aux_coef else (out, None)
            t_h = teacher_fn(ids, pos, att, targets) if teacher is not None else flat_h
            kept = layout.n_real > 0 and keeps_logits(layout.n_real, chunk, vocab)
            self._head_kept = kept
            if kept:        # the head over all scored rows at once, its logits kept
                hs, z = kept_logits(model, flat_h, layout, temp)
                scores = kept_chunk_scores(post_fn, z, t_h, layout, t_temp, n_scores)
            else:
                scores = chunk_scores(stats_fn, flat_h, t_h, layout, temp, t_temp, n_scores)
            res = loss_and_grads(tuple(scores) + tuple(loss_args))
            loss, metrics, g = res[0], res[1], [x.asnumpy() for x in res[2:]]
            g_ent = g[1] if entropy else None
            g_kl = g[-1] if teacher is not None else None
            parts = []
            fns = recompute_fns() if not kept else None
            for s in layout.spans():
                g_lp = layout.per_chunk(g[0], s)
                grads = (g_lp, layout.per_chunk(g_ent, s) if ent_grad else g_lp,
                         layout.per_chunk(g_kl, s) if g_kl is not None else g_lp, temp, t_temp)
                if kept:    # dz of the chunk's rows, written over their logits (in place)
                    dz = kept_grad_fn(chunk_of(z, layout, s), t_h, *layout.inputs(s), *grads)
                    n = min(s.stop, layout.n_real) - s.start
                    z[s.start:s.start + n] = dz[:n] if n < int(dz.shape[0]) else dz
                else:
                    parts.append(fns["grad"](flat_h, t_h, *layout.inputs(s), *grads))
            if kept:
                d_h, d_w = kept_head_grads(w, z, hs, trainable)
                del z
                g_h = layout.real_rows_to_rows(d_h)
                backward(ids, pos, att, targets, g_h, aux_w, d_w if d_w is not None
                         else g_h[:1])
            else:
                g_h = layout.to_rows(parts) if parts else ops.zeros_like(flat_h)
                backward_from_acc(ids, pos, att, targets, g_h, aux_w)
            if aux_coef:        # the loss as the fused step reports it (moe/aux_loss: pre-pass)
                loss = loss + aux_coef * (aux * aux_w).sum()
            return loss, tuple(ops.stop_gradient(v) for v in metrics)

        return run
