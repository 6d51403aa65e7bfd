"""The chunked LM head in host memory with NumPy (MindSpore on CPU).

On CPU a MindSpore Tensor's ``asnumpy`` is its own storage (:func:`optim._host_array`), so the
head's weight, the final hidden states and the optimizer's flat gradient accumulator can be
read and written as NumPy arrays, and NumPy's BLAS runs the head's three matrix products with
no (V, H) MindSpore tensor in between::

    1. h = decoder(ids)[scored positions]                (n, H)   compiled graph
    2. z = h W^T / temperature                           (n, V)   one GEMM (or per chunk)
       per chunk of rows: the truncation mask, log p, entropy      NumPy, float32
    3. loss, dL/d(scores) on the (B, T) scores                       compiled (as before)
    4. per chunk: dz = d(sum logp g_logp + entropy g_ent) / dz      NumPy, over z in place
       g_h = dz W (n, H);  accumulator[W] += dz^T h  (blocks of vocabulary rows, in place)
    5. decoder backward from the input embeddings x = W_emb[ids]     compiled graph
       -> d/dx and the other parameters' gradients; accumulator[W_emb][ids] += d/dx (rows)

Step 5 differentiates :meth:`Qwen2ForCausalLM.layers_from` with respect to the embeddings
rather than the table, so the lookup's dense (V, H) gradient is never built: the embedding
rows' gradient is scattered into the accumulator's host memory, and with tied embeddings the
head's weight gradient lands in the same rows of the same memory. When all scored rows' (n, V)
logits fit the head's budget (:func:`chunked_head.keeps_logits`), step 2 is one product over
all rows and step 4 rewrites those logits into their gradient; otherwise each chunk's logits
are computed again in step 4 (four products per token), one chunk's memory at a time.

The scores follow ``truncation.truncated_logits_and_logp`` and
``algorithms.entropy.entropy_from_logits`` (float32): cut tokens at ``FILL``, the scored token
kept through its own term in the normaliser, the entropy of the cut distribution. With
p = exp(zz) / S the cut distribution (zz = cut - max, S its sum), total = S + the cut target's
own term ``extra``, and Hbar = sum p zz:

    d log p_t / dz_j = [j = t] (1 - extra / total) - exp(zz_j) / total
    d entropy / dz_j = -p_j (zz_j - Hbar)

NumPy's BLAS threads follow ``train.threads`` (:func:`limit_host_blas`).
"""

from __future__ import annotations

import ctypes
import logging
from typing import Optional, Tuple

import numpy as np

from algorithms.truncation import FILL, keep_mask

log = logging.getLogger("mindrl.backends.mindspore.backend")

# the head runs in host memory where it can (False: the compiled MindSpore chunks; tests and
# benchmarks compare the two)
HOST_HEAD = True

VOCAB_BLOCK = 8192      # vocabulary rows per product of the weight gradient's blocks


def host_array(t) -> Optional[np.ndarray]:
    """``t``'s own float32 memory as a NumPy array of its shape, or None (a copy would be
    returned: an accelerator, or another dtype)."""
    import mindspore as ms

    from mindrl.backends.mindspore.optim import _host_array

    if t.dtype != ms.float32:
        return None
    a = _host_array(t)
    return None if a is None else a.reshape(tuple(int(d) for d in t.shape))


class RowStats:
    """Per scored row, what the backward needs of the forward's scores: S (the cut
    distribution's sum of exp(zz)), total (S plus the cut target's own term), extra (that
    term) and Hbar (sum p zz)."""

    def __init__(self, n: int):
        self.S = np.zeros(n, np.float32)
        self.total = np.zeros(n, np.float32)
        self.extra = np.zeros(n, np.float32)
        self.hbar = np.zeros(n, np.float32)


def scores_in_place(z: np.ndarray, tgt: np.ndarray, trunc, entropy: bool,
                    stats: Optional[RowStats] = None, at: int = 0
                    ) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """One chunk's (c, V) float32 tempered logits ``z`` -> ((c,) log q(target), (c,) entropy
    or None); ``z`` becomes zz = cut - max(cut) (the cut tokens near ``FILL``), what
    :func:`grad_in_place` takes. ``stats``: rows ``at``.. receive the backward's row terms."""
    c = z.shape[0]
    r = np.arange(c)
    z_t = z[r, tgt].copy()
    if trunc is not None:
        keep = keep_mask(z, trunc, np.float32)
        kept_t = keep[r, tgt].astype(np.float32)
        np.add(z, np.float32(FILL), out=z, where=~keep)
        del keep
    else:
        kept_t = np.ones(c, np.float32)
    m = z.max(-1)
    z -= m[:, None]
    e = np.exp(z)
    S = e.sum(-1, dtype=np.float32)
    extra = (np.float32(1.0) - kept_t) * np.exp(z_t - m)
    total = S + extra
    logp = z_t - m - np.log(total)
    ent = hbar = None
    if entropy:
        hbar = np.einsum("ij,ij->i", e, z) / S
        ent = np.log(S) - hbar
    if stats is not None:
        s = slice(at, at + c)
        stats.S[s], stats.total[s], stats.extra[s] = S, total, extra
        if hbar is not None:
            stats.hbar[s] = hbar
    return logp.astype(np.float32), None if ent is None else ent.astype(np.float32)


def grad_in_place(zz: np.ndarray, tgt: np.ndarray, g_logp: np.ndarray,
                  g_ent: Optional[np.ndarray], stats: RowStats, at: int,
                  inv_temp: float) -> np.ndarray:
    """One chunk's zz (from :func:`scores_in_place`) -> in place, the gradient of
    sum(logp g_logp [+ entropy g_ent]) w.r.t. the head's raw output (through the
    temperature), float32 (c, V)."""
    c = zz.shape[0]
    s = slice(at, at + c)
    S, total, extra = stats.S[s], stats.total[s], stats.extra[s]
    e = np.exp(zz)
    if g_ent is not None:
        zz -= stats.hbar[s][:, None]
        zz *= (-g_ent / S)[:, None]
        zz -= (g_logp / total)[:, None]
        zz *= e
    else:
        np.multiply(e, (-g_logp / total)[:, None], out=zz)
    del e
    r = np.arange(c)
    zz[r, tgt] += g_logp * (np.float32(1.0) - extra / total)
    if inv_temp != 1.0:
        zz *= np.float32(inv_temp)
    return zz


def add_weight_grad(acc_w: np.ndarray, dz: np.ndarray, h: np.ndarray) -> None:
    """acc_w (V, H) += dz^T h, a block of vocabulary rows per product (no (V, H) temporary)."""
    V = acc_w.shape[0]
    tmp = np.empty((min(VOCAB_BLOCK, V), acc_w.shape[1]), np.float32)
    for v0 in range(0, V, VOCAB_BLOCK):
        v1 = min(V, v0 + VOCAB_BLOCK)
        out = tmp[:v1 - v0]
        np.matmul(dz[:, v0:v1].T, h, out=out)
        acc_w[v0:v1] += out


def head_logits(h: np.ndarray, w: np.ndarray, inv_temp: float) -> np.ndarray:
    """(c, H) hidden rows, (V, H) weight -> (c, V) float32 tempered logits h W^T / temp."""
    z = np.matmul(h, w.T)
    if inv_temp != 1.0:
        z *= np.float32(inv_temp)
    return z


# ------------------------------------------------------------------------------ BLAS threads
_BLAS_LIMIT = None


def _openblas_libs():
    """The OpenBLAS libraries loaded into this process (NumPy's among them)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if len(line.split()) >= 6}
    except OSError:
        return []
    return sorted(p for p in paths if "openblas" in p.lower() and ".so" in p)


def loss_with_fallback(compiled_loss: list, eager, args):
    """``compiled_loss[0](*args)``; a loss that does not compile into a MindSpore graph switches
    ``compiled_loss[0]`` to ``eager`` (the same function in PyNative) for good, with a warning."""
    try:
        return compiled_loss[0](*args)
    except (RuntimeError, TypeError, ValueError, KeyError) as err:
        if compiled_loss[0] is eager:
            raise
        log.warning("the loss does not compile into a MindSpore graph (%s); the chunked "
                    "step runs it in PyNative", str(err).strip().splitlines()[0][:300])
        compiled_loss[0] = eager
        return eager(*args)


def _openblas_calls(verb: str):
    """OpenBLAS's ``set`` / ``get`` thread-count functions in the libraries this process has
    loaded, one per library (the 64-bit-integer and scipy-openblas builds name them apart)."""
    for path in _openblas_libs():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in (f"scipy_openblas_{verb}_num_threads64_", f"scipy_openblas_{verb}_num_threads",
                    f"openblas_{verb}_num_threads64_", f"openblas_{verb}_num_threads"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                yield fn
                break


def limit_host_blas(n: int) -> str:
    """Size NumPy's BLAS thread pool to ``n`` (``train.threads``) for the host head: through
    threadpoolctl when it is installed, else through OpenBLAS's own setter in the libraries
    this process has loaded. Returns how ('threadpoolctl', 'openblas', or 'unchanged':
    then only OPENBLAS_NUM_THREADS / OMP_NUM_THREADS at start-up size it)."""
    global _BLAS_LIMIT
    try:
        from threadpoolctl import threadpool_limits

        _BLAS_LIMIT = threadpool_limits(limits=int(n), user_api="blas")
        return "threadpoolctl"
    except ImportError:
        pass
    done = False
    for fn in _openblas_calls("set"):
        fn(ctypes.c_int(int(n)))
        done = True
    if not done:
        log.info("NumPy's BLAS threads not set to train.threads=%d (no threadpoolctl, no "
                 "OpenBLAS setter found)", n)
    return "openblas" if done else "unchanged"


def host_blas_threads() -> Optional[int]:
    """NumPy's OpenBLAS thread count where it can be read (tests), else None."""
    try:
        from threadpoolctl import threadpool_info

        for info in threadpool_info():
            if info.get("user_api") == "blas":
                return int(info["num_threads"])
    except ImportError:
        pass
    for fn in _openblas_calls("get"):
        return int(fn())
    return None


# ------------------------------------------------------------------------------ the steps
def host_head_weight(backend, model, weight, teacher=None) -> Optional[np.ndarray]:
    """The (V, H) host view of ``model``'s head ``weight`` when the step can run its head in
    host memory (:data:`HOST_HEAD`, float32 weights, CPU, no distillation teacher's exact KL,
    the unsharded optimizer with a host accumulator), else None."""
    from mindrl.backends.mindspore.optim import AdamW, _host_array

    if not HOST_HEAD or teacher is not None:
        return None
    opt = getattr(backend, "optimizer", None)
    if model is backend.model and (type(opt) is not AdamW or _host_array(opt.grad_flat) is None):
        return None
    return host_array(weight)


def _rows_of(values: Optional[np.ndarray], idx: np.ndarray) -> Optional[np.ndarray]:
    return None if values is None else values.reshape(-1)[idx].astype(np.float32)


def host_scores(hs: np.ndarray, w: np.ndarray, targets: np.ndarray, chunk: int, inv_temp: float,
                trunc, entropy: bool, keep: bool):
    """The scored rows' (n,) log-probs [and entropies] from their (n, H) hidden rows, a chunk of
    rows at a time. ``keep``: one product over all rows, and the (n, V) zz kept for the
    backward (returned with the row terms), else None for it."""
    n = hs.shape[0]
    logp = np.zeros(n, np.float32)
    ent = np.zeros(n, np.float32) if entropy else None
    stats = RowStats(n)
    z = head_logits(hs, w, inv_temp) if keep else None
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        zc = z[a:b] if keep else head_logits(hs[a:b], w, inv_temp)
        lp, en = scores_in_place(zc, targets[a:b], trunc, entropy, stats, a)
        logp[a:b] = lp
        if entropy:
            ent[a:b] = en
        del zc
    return logp, ent, stats, z


def make_host_step(backend, chunk: int, loss_grads, pieces, *, entropy: bool,
                   ent_grad: bool, inv_temp: float, trunc, aux_coef: float):
    """The chunked micro-batch step with the head in host memory (module docstring):
    ``run(ids, pos, att, targets, mask, loss_args, aux_w) -> (loss, metrics)``, the gradient
    added into the optimizer's flat accumulator in place. ``pieces``: chunked_head's
    (``TokenChunks``, ``keeps_logits``, ``make_hidden_fn``, the head's weight)."""
    import mindspore as ms
    from mindspore import Tensor, ops

    from mindrl.backends.mindspore.optim import _host_array

    TokenChunks, keeps_logits, make_hidden_fn, head_w = pieces
    model, opt = backend.model, backend.optimizer
    H, vocab = model.spec.hidden_size, model.spec.vocab_size
    emb_w = model.model.embed_tokens.weight
    slot = {id(p): i for i, p in enumerate(opt.params)}
    params = list(backend.params)
    head_at = slot.get(id(head_w)) if any(p is head_w for p in params) else None
    emb_at = slot.get(id(emb_w)) if any(p is emb_w for p in params) else None
    body = [p for p in params if p is not head_w and p is not emb_w]
    body_at = [slot[id(p)] for p in body]
    hidden_fn = ms.jit(make_hidden_fn(model, with_aux=bool(aux_coef)))
    compiled_loss = [ms.jit(loss_grads)]

    def surrogate(x, pos, att, targets, g_h, aux_w):
        S, T = x.shape[1], targets.shape[1]
        if aux_coef:
            h, sums = model.layers_from(x, pos, att, False, True)
            h = h[:, S - T - 1:S - 1].reshape(-1, H)
            return (h * g_h).sum() + aux_coef * (sums[1] * aux_w).sum()
        h = model.layers_from(x, pos, att)[0][:, S - T - 1:S - 1].reshape(-1, H)
        return (h * g_h).sum()

    grad = ms.grad(surrogate, 0, tuple(body)) if body else ms.grad(surrogate, 0)

    @ms.jit
    def backward(x, pos, att, targets, g_h, aux_w):
        return grad(x, pos, att, targets, g_h, aux_w)

    def loss_and_grads(args):
        return loss_with_fallback(compiled_loss, loss_grads, args)

    def run(ids, pos, att, targets, mask, loss_args, aux_w):
        layout = TokenChunks(mask.asnumpy(), targets.asnumpy(), chunk)
        n = layout.n_real
        real = layout.idx[:n]
        tgt = layout.targets[:n]
        w = host_array(head_w)          # the weights' own memory, read again each step
        out = hidden_fn(ids, pos, att, targets)
        flat_h, aux = (out[0], out[1]) if aux_coef else (out, None)
        hs = flat_h.asnumpy()[real]                               # (n, H), a copy
        kept = n > 0 and keeps_logits(n, chunk, vocab)
        backend._head_kept = kept
        logp, ent, stats, z = host_scores(hs, w, tgt, layout.chunk, inv_temp, trunc, entropy,
                                          kept)
        B, T = layout.shape

        def to_bt(v):
            full = np.zeros(B * T, np.float32)
            full[real] = v
            return Tensor(full.reshape(B, T))

        scores = [to_bt(logp)] + ([to_bt(ent)] if entropy else [])
        res = loss_and_grads(tuple(scores) + tuple(loss_args))
        loss, metrics = res[0], res[1]
        g_lp = _rows_of(res[2].asnumpy(), real)
        g_en = _rows_of(res[3].asnumpy(), real) if (entropy and ent_grad) else None
        acc = _host_array(opt.grad_flat)          # waits for the graphs queued before it
        acc_w = None
        if head_at is not None:
            o = opt.offsets[head_at]
            acc_w = acc[o:o + opt.sizes[head_at]].reshape(opt.shapes[head_at])
        d_h = np.zeros((n, H), np.float32)
        for a in range(0, n, layout.chunk):
            b = min(n, a + layout.chunk)
            if kept:
                zz = z[a:b]
            else:                                   # the chunk's head again
                zz = head_logits(hs[a:b], w, inv_temp)
                scores_in_place(zz, tgt[a:b], trunc, False)
            dz = grad_in_place(zz, tgt[a:b], g_lp[a:b], None if g_en is None else g_en[a:b],
                               stats, a, inv_temp)
            if not kept:
                np.matmul(dz, w, out=d_h[a:b])
                if acc_w is not None:
                    add_weight_grad(acc_w, dz, hs[a:b])
            del zz, dz
        if kept:
            np.matmul(z, w, out=d_h)
            if acc_w is not None:
                add_weight_grad(acc_w, z, hs)
            del z
        g_h = np.zeros((B * T, H), np.float32)
        g_h[real] = d_h
        x = Tensor(host_array(emb_w)[ids.asnumpy()])
        grads = backward(x, pos, att, targets, Tensor(g_h), aux_w)
        g_x, g_body = (grads[0], grads[1]) if body else (grads, ())
        acc = _host_array(opt.grad_flat)
        for i, g in zip(body_at, g_body):
            acc[opt.offsets[i]:opt.offsets[i + 1]] += g.asnumpy().reshape(-1)
        if emb_at is not None:
            o = opt.offsets[emb_at]
            acc_e = acc[o:o + opt.sizes[emb_at]].reshape(opt.shapes[emb_at])
            np.add.at(acc_e, ids.asnumpy().reshape(-1), g_x.asnumpy().reshape(-1, H))
        if aux_coef:
            loss = loss + aux_coef * (aux * aux_w).sum()
        return loss, tuple(ops.stop_gradient(v) for v in metrics)

    return run


def host_logprobs(hidden_fn, w: np.ndarray, trunc, inputs, inv_temp: float, chunk: int,
                  TokenChunks):
    """The no-grad log-prob pass with the head in host memory: ``inputs`` = (ids, pos, att,
    targets, mask) -> (B, T) log-probs x mask (a MindSpore Tensor); ``TokenChunks``:
    chunked_head's layout."""
    from mindspore import Tensor

    ids, pos, att, targets, mask = inputs
    layout = TokenChunks(mask.asnumpy(), targets.asnumpy(), chunk)
    n = layout.n_real
    real = layout.idx[:n]
    hs = hidden_fn(ids, pos, att, targets).asnumpy()[real]
    logp, _, _, _ = host_scores(hs, w, layout.targets[:n], layout.chunk, inv_temp, trunc, False,
                                False)
    B, T = layout.shape
    full = np.zeros(B * T, np.float32)
    full[real] = logp
    return Tensor(full.reshape(B, T)) * mask
