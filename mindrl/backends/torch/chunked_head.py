"""The LM head in chunks: per-token log-probs (entropies, the exact KL to a teacher) from the
final hidden states and the head's weight, a chunk of tokens at a time.

The full path builds the (N, V) float32 logits of all N scored tokens, then log_softmax (a
second (N, V)), and autograd keeps both for the backward: at V = 151,936 that is about
0.6 MB per token each, so one 16K-token row needs ~10 GB of logits whatever the model's size.
Here the decoder runs as usual with its head bypassed (:func:`head_bypassed`: the model's own
forward, so routing replay, the MoE load-balancing loss and LoRA adapters behave as before),
and :func:`token_stats` projects ``chunk`` hidden rows at a time::

    z_c = (h_c W^T + b).float() / temperature      (c, V)   one chunk's logits
    logp_c = log_softmax(z_c)[target]              (c,)

With gradients, when what the backward keeps for all N tokens (the (N, V) logits or
log-softmax, :func:`saved_copies`) fits half the head's budget (:data:`HEAD_BUDGET_BYTES`),
the chunks run plainly and the head is computed once; for the plain RL loss (no
differentiable entropy, truncation or teacher) that is :class:`_TargetLogp`, which keeps the
(N, V) logits (in the head's dtype) instead of log-softmax outputs and runs each of the head's
three matmuls once over all N rows. Above it, each chunk runs under
non-reentrant ``torch.utils.checkpoint``: the forward keeps only the chunk's inputs (hidden
rows, targets), and the backward recomputes the chunk's logits and frees them before the next
chunk, so the head's peak memory is O(chunk x V), not O(N x V), at the price of a second
forward of the head. The numbers are the full path's (the same float32 operations on the same
rows; the rollout's top-k / min-p / top-p masks are computed inside the chunk from the same logits).

Models whose causal-LM forward does more than a plain linear head (logit soft-capping or
scaling) and a sharded root (``train.fsdp``) take the full path (:func:`plain_head` says why).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Callable, Dict, Iterator, Optional, Tuple

import torch
import torch.nn.functional as F

from mindrl.backends import chunking
from mindrl.backends.chunking import (  # noqa: F401  (re-exported)
    HEAD_BUDGET_BYTES, LIVE_COPIES, MIN_CHUNK, chunk_tokens)

# model_type of the transformers causal LMs whose forward returns lm_head(hidden) unchanged
PLAIN_HEAD_TYPES = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "llama", "mistral", "mixtral")


def saved_copies(entropy: Optional[str], truncate, teacher, head_dtype: torch.dtype) -> float:
    """:func:`mindrl.backends.chunking.saved_copies` for :func:`token_stats`'s arguments, with
    the fused path (:data:`FUSED_TARGET_LOGP`) keeping logits of ``head_dtype``."""
    fused = torch.empty(0, dtype=head_dtype).element_size() if FUSED_TARGET_LOGP else 0
    return chunking.saved_copies(entropy == "grad", truncate is not None, teacher is not None,
                                 fused)


def plain_head(model, fsdp: bool = False) -> Tuple[Optional[torch.nn.Linear], str]:
    """(the model's head as a plain ``nn.Linear``, "") when the chunked head can replace it,
    else (None, why): a sharded model, a head that is not a plain linear layer (an adapter on
    it), or an architecture whose forward post-processes the logits."""
    if fsdp:
        return None, "train.fsdp shards the head"
    base = model.get_base_model() if hasattr(model, "get_base_model") else model   # peft
    get = getattr(base, "get_output_embeddings", None)
    head = get() if get is not None else None
    if type(head) is not torch.nn.Linear:
        return None, f"the output layer is {type(head).__name__}, not a plain linear layer"
    kind = getattr(getattr(base, "config", None), "model_type", "?")
    if kind not in PLAIN_HEAD_TYPES:
        return None, (f"model_type '{kind}' may transform its logits after the head (chunked "
                      f"for: {', '.join(PLAIN_HEAD_TYPES)})")
    return head, ""


def _hidden(module, x):
    return x


@contextlib.contextmanager
def head_bypassed(head: torch.nn.Linear) -> Iterator[torch.nn.Linear]:
    """While the block runs, ``head`` returns its input: the causal LM's forward then returns
    the final hidden states in place of logits (at the positions ``logits_to_keep`` selects)."""
    head.forward = _hidden.__get__(head)
    try:
        yield head
    finally:
        del head.forward


def token_stats(hidden: torch.Tensor, head: torch.nn.Linear, targets: torch.Tensor, *,
                temperature: float, chunk: int, ops, entropy: Optional[str] = None,
                truncate: Optional[Callable] = None,
                teacher: Optional[Tuple[torch.Tensor, torch.nn.Linear, float]] = None
                ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(N,) log p(target) under ``head(hidden) / temperature``, [(N,) entropy], [(N,) exact
    KL(p || teacher)], ``chunk`` rows at a time.

    ``hidden`` (N, H) final hidden states; ``targets`` (N,) int64 ids. ``entropy``: "grad",
    "no_grad" or None. ``truncate(z, targets)``: the (c, V) tempered logits under the rollout's
    truncation (None: untruncated). ``teacher``: ((N, H) teacher hidden states, the teacher's
    head, its temperature); the KL (:func:`algorithms.distill.full_reverse_kl`) is
    differentiable through the student only."""
    from algorithms.entropy import entropy_from_logits

    W, b = head.weight, head.bias
    scale = temperature if temperature > 0 else 1.0

    def run(h, tgt, t_h=None):
        z = F.linear(h, W, b).float()
        if scale != 1.0:                # (x / 1.0 == x: the full path's numbers either way)
            z = z / scale
        if truncate is not None:
            z = truncate(z, tgt)
        logp = torch.gather(torch.log_softmax(z, dim=-1), -1, tgt.unsqueeze(-1)).squeeze(-1)
        ent = kl = None
        if entropy == "grad":
            ent = entropy_from_logits(ops, z)
        elif entropy == "no_grad":
            with torch.no_grad():
                ent = entropy_from_logits(ops, z.detach())
        if t_h is not None:
            from algorithms.distill import full_reverse_kl

            t_head, t_temp = teacher[1], teacher[2]
            with torch.no_grad():
                tz = F.linear(t_h, t_head.weight, t_head.bias).float()
                tz = tz / (t_temp if t_temp > 0 else 1.0)
            kl = full_reverse_kl(ops, z, tz)
        return logp, ent, kl

    grad = torch.is_grad_enabled() and (hidden.requires_grad or W.requires_grad
                                        or (b is not None and b.requires_grad))
    N = hidden.shape[0]
    step = chunk if chunk > 0 else max(N, 1)
    # Recompute each chunk in the backward only when what autograd would keep for all of them
    # exceeds half the head's budget (the other half: one chunk's backward working set): the
    # recompute is a second forward of the head, a quarter of the head's training FLOPs (at
    # V = 151,936 the head is most of a small model's work).
    # (the memory plan makes the same decision: mindrl.memory.plan)
    recompute = grad and chunking.recomputes_chunks(
        N, step, W.shape[0], saved_copies(entropy, truncate, teacher,
                                     torch.promote_types(hidden.dtype, W.dtype)),
        HEAD_BUDGET_BYTES)
    if FUSED_TARGET_LOGP and entropy != "grad" and truncate is None and teacher is None \
            and not recompute:
        want = entropy == "no_grad"
        if grad:
            logp, ent = _TargetLogp.apply(hidden, W, b, targets, scale, step, want)
        else:
            parts = [_stats(F.linear(hidden[s:s + step], W, b), targets[s:s + step], scale,
                            want)[:2] for s in range(0, N, step)]
            logp = torch.cat([p[0] for p in parts]) if parts else hidden.new_zeros(0).float()
            ent = torch.cat([p[1] for p in parts]) if want and parts else None
        return logp, (ent if want else None), None
    parts = []
    for s in range(0, N, step):
        args = [hidden[s:s + step], targets[s:s + step]]
        if teacher is not None:
            args.append(teacher[0][s:s + step])
        if recompute:
            from torch.utils.checkpoint import checkpoint

            parts.append(checkpoint(run, *args, use_reentrant=False, preserve_rng_state=False))
        else:
            parts.append(run(*args))

    def cat(i):
        if parts and parts[0][i] is None:
            return None
        return torch.cat([p[i] for p in parts]) if parts else hidden.new_zeros(0)

    return cat(0), cat(1), cat(2)


# ---------------------------------------------------------------------------- the fused path
# The plain RL loss (no differentiable entropy, no truncation, no teacher) with the logits kept:
# log p(target) = z_t - logsumexp(z) with the backward written out, in place of autograd's
# log_softmax + gather. The forward keeps one (N, V) tensor (the logits, shifted by their row
# maximum in float32; the raw bf16 logits otherwise) and the backward turns it into the logits'
# gradient in place, so the head's two gradient matmuls run once over all N rows (one
# weight-gradient GEMM, one (V, H) result) instead of once per chunk plus a sum. The float
# arithmetic per element is log_softmax's (z - max - log sum exp, and its backward
# g * onehot - exp(out) * g); only the GEMMs' summation order differs (measured: 1e-7 relative).
#
# The element-wise passes run a few rows at a time (:data:`BLOCK_BYTES` of float32 per block,
# in two scratch blocks reused across the rows): each row's arithmetic is the same, but a
# block's float32 upcast, shift, exp and gradient stay in cache, where a chunk's (110 x 151,936
# float32: 67 MB) went through memory once per pass, each pass into a fresh page-faulted tensor.
#
# The weight gradient is written into the weight's ``.grad`` by the backward itself
# (:data:`GRAD_INTO_BUFFER`): into a (V, H) buffer kept from backward to backward on CPU
# (:func:`_grad_buffer`), or added in place into a gradient already there. Returned to
# autograd, a fresh (V, H) product is page-faulted in on its first write, and a tied input
# embedding's sparse rows are added to it out of place (autograd sums a dense and a sparse
# gradient into a new dense tensor); written here, the embedding's rows land in place.
FUSED_TARGET_LOGP = True
GRAD_INTO_BUFFER = True
BLOCK_BYTES = chunking.HEAD_BLOCK_BYTES   # float32 bytes per block of rows (0: a chunk's rows)

# id(weight) -> its (V, H) gradient buffer, dropped with the weight (tensors compare by value,
# so they cannot key a WeakKeyDictionary)
_GRAD_BUFFERS: Dict[int, torch.Tensor] = {}


def _grad_buffer(weight: torch.Tensor) -> Optional[torch.Tensor]:
    """The (V, H) gradient buffer kept for parameter ``weight`` (None where none is kept: off
    CPU, where the allocator reuses device memory)."""
    if weight.device.type != "cpu":
        return None
    buf = _GRAD_BUFFERS.get(id(weight))
    if buf is None or buf.shape != weight.shape or buf.dtype != weight.dtype:
        if buf is None:
            weakref.finalize(weight, _GRAD_BUFFERS.pop, id(weight), None)
        buf = torch.empty_like(weight, memory_format=torch.contiguous_format)
        _GRAD_BUFFERS[id(weight)] = buf
    return buf


def _writes_own_grad(weight: torch.Tensor) -> bool:
    """Whether the backward may write ``weight``'s gradient itself: a leaf parameter without
    gradient hooks (which autograd's accumulation would run)."""
    return (GRAD_INTO_BUFFER and weight.is_leaf and weight.requires_grad
            and not getattr(weight, "_backward_hooks", None)
            and not getattr(weight, "_post_accumulate_grad_hooks", None)
            and type(weight) in (torch.Tensor, torch.nn.Parameter))


def _block_rows(step: int, V: int) -> int:
    """Rows per block of the element-wise passes (at most the chunk's ``step``)."""
    if BLOCK_BYTES <= 0:
        return step
    return max(1, min(step, BLOCK_BYTES // (4 * max(V, 1))))


def _stats(z: torch.Tensor, tgt: torch.Tensor, scale: float, entropy: bool,
           scratch: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
    """(logp (c,), entropy (c,) or None, row max (c, 1), log sum exp (c, 1), shifted logits)
    of one block's (c, V) logits ``z``, float32; ``z`` is overwritten when it is float32 (its
    shifted, tempered values: the returned tensor is then ``z`` itself). ``scratch``: two
    float32 blocks of at least c rows for the upcast and the exponentials."""
    c = z.shape[0]
    if z.dtype == torch.float32:
        zf = z
    elif scratch is not None:
        zf = scratch[0][:c].copy_(z)
    else:
        zf = z.float()
    if scale != 1.0:
        zf.div_(scale)
    m = zf.amax(dim=-1, keepdim=True)
    zf.sub_(m)                                                  # z - max, as log_softmax
    ex = torch.exp(zf) if scratch is None else torch.exp(zf, out=scratch[1][:c])
    total = ex.sum(dim=-1, keepdim=True)
    log_total = total.log()
    logp = zf.gather(-1, tgt.unsqueeze(-1)).squeeze(-1) - log_total.squeeze(-1)
    ent = None
    if entropy:                     # H = log S - sum exp(z') z' / S  (z' = z - max)
        ent = log_total.squeeze(-1) - ex.mul_(zf).sum(dim=-1) / total.squeeze(-1)
    return logp, ent, m, log_total, zf


class _TargetLogp(torch.autograd.Function):
    """(N,) log p(targets) and (N,) entropy (no gradient) of ``F.linear(hidden, weight, bias)
    / scale``, ``step`` rows at a time; differentiable in hidden, weight and bias."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, scale, step, entropy):
        Z = F.linear(hidden, weight, bias)                      # (N, V), one GEMM
        N, V = Z.shape
        blk = _block_rows(step, V)
        scratch = None
        if BLOCK_BYTES > 0 and N:
            scratch = (Z.new_empty((min(blk, N), V), dtype=torch.float32),
                       Z.new_empty((min(blk, N), V), dtype=torch.float32))
        logps, ents, ms, logs = [], [], [], []
        for s in range(0, N, blk):
            logp, ent, m, log_total, _ = _stats(Z[s:s + blk], targets[s:s + blk], scale,
                                                entropy, scratch)
            logps.append(logp), ms.append(m), logs.append(log_total)
            if entropy:
                ents.append(ent)
        cat = (lambda xs: torch.cat(xs)) if N else (lambda xs: Z.new_zeros(0).float())
        ctx.save_for_backward(hidden, weight, Z, targets, cat(ms), cat(logs))
        ctx.scale, ctx.step, ctx.has_bias, ctx.used = scale, step, bias is not None, False
        # the parameter itself (not a saved copy of it): its .grad is written in the backward
        ctx.param = weight if _writes_own_grad(weight) else None
        ent = cat(ents) if entropy else Z.new_zeros(0).float()
        ctx.mark_non_differentiable(ent)
        return cat(logps), ent

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g, _g_entropy):
        if ctx.used:
            raise RuntimeError("the chunked head's backward runs once (its logits are reused "
                               "for their gradient): do not retain its graph")
        ctx.used = True
        hidden, weight, Z, targets, m, log_total = ctx.saved_tensors
        scale = ctx.scale
        N, V = Z.shape
        blk = _block_rows(ctx.step, V)
        g = g.float()
        scratch = None
        if Z.dtype != torch.float32 and BLOCK_BYTES > 0 and N:
            scratch = Z.new_empty((min(blk, N), V), dtype=torch.float32)
        for s in range(0, N, blk):
            zc = Z[s:s + blk]
            if zc.dtype == torch.float32:       # z - max, tempered, from the forward
                dz = zc.sub_(log_total[s:s + blk])
            else:
                dz = zc.float() if scratch is None else scratch[:zc.shape[0]].copy_(zc)
                if scale != 1.0:
                    dz.div_(scale)
                dz.sub_(m[s:s + blk]).sub_(log_total[s:s + blk])
            gc = g[s:s + blk].unsqueeze(-1)
            dz.exp_().mul_(-gc)                                 # -softmax * g
            dz.scatter_add_(-1, targets[s:s + blk].unsqueeze(-1), gc)   # + onehot * g
            if scale != 1.0:
                dz.div_(scale)
            if dz is not zc:
                zc.copy_(dz)                                    # rounded to the head's dtype
        dZ = Z                                                  # (N, V) d loss / d logits
        d_hidden = dZ @ weight if ctx.needs_input_grad[0] else None
        d_weight = None
        if ctx.needs_input_grad[1]:
            param, ctx.param = ctx.param, None
            if param is None or (param.grad is not None
                                 and param.grad.layout != torch.strided):
                d_weight = dZ.t() @ hidden
            elif param.grad is None:            # (V, H) into memory kept from the last time
                buf = _grad_buffer(param)
                param.grad = torch.mm(dZ.t(), hidden, out=buf) if buf is not None \
                    else dZ.t() @ hidden
            else:                               # accumulated in place (micro-batches)
                param.grad.addmm_(dZ.t(), hidden)
        d_bias = dZ.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return d_hidden, d_weight, d_bias, None, None, None, None


def sparse_tied_embedding(model) -> bool:
    """When ``model``'s input embedding shares its trainable weight with the head (tied
    embeddings), make the embedding's backward sparse: it then yields only the rows of the
    tokens present (repeated tokens summed), which autograd adds in place into the head's dense
    (V, H) gradient, instead of a dense (V, H) zero-filled gradient plus a (V, H) sum. The
    parameter's gradient stays dense and the same sum. Returns whether it applied."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model   # peft
    get_in = getattr(base, "get_input_embeddings", None)
    get_out = getattr(base, "get_output_embeddings", None)
    if not SPARSE_TIED_EMBEDDING or get_in is None or get_out is None:
        return False
    emb, head = get_in(), get_out()
    if type(emb) is not torch.nn.Embedding or emb.max_norm is not None \
            or getattr(head, "weight", None) is not emb.weight or not emb.weight.requires_grad:
        return False
    emb.sparse = True
    return True


SPARSE_TIED_EMBEDDING = True
