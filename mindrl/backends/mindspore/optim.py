"""AdamW with gradient accumulation and global-norm clipping, as compiled MindSpore functions.

Written out instead of ``mint.optim.AdamW`` / ``nn.AdamWeightDecay`` because (PLATFORM.md)
``mint.optim.*`` silently never updates parameters in PyNative on CPU, and
``nn.AdamWeightDecay`` has no bias correction. Every state change goes through ``ops.assign``
inside ``mindspore.jit`` functions, which do update on CPU (tests check parameters move).

The update is torch's ``AdamW`` step exactly (decoupled decay, bias-corrected moments):

    p <- p (1 - lr wd)
    m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
    p <- p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)

with g = coef * (sum of the micro-batch gradients, summed across ranks), coef = min(1,
clip / (||g|| + 1e-6)) as ``torch.nn.utils.clip_grad_norm_``.

Flat state: the gradient accumulator and both moments are ONE float32 vector each (all
parameters concatenated in ``params`` order), so accumulation, the norm and the moment update are
a handful of kernels instead of ~20 per parameter. On CPU every MindSpore kernel costs a launch
(tens of microseconds, and a scheduler slice when the cores are busy), and the per-parameter
version spent ~600 of a train step's ~1000 kernels here. The element-wise arithmetic is unchanged;
only the norm's summation order differs (float rounding). Checkpoints still hold one
``exp_avg.<name>`` / ``exp_avg_sq.<name>`` array per parameter.

Master weights: when a parameter is stored in a lower precision than float32 (``model.dtype``
bfloat16 / float16 on an accelerator), AdamW keeps ONE flat float32 master vector as well, steps
the masters and writes each master rounded (``astype``, round-to-nearest-even) into its
parameter: an update smaller than half a bf16 step of the weight is kept in the master instead
of rounded away. All-float32 parameters are their own masters (no extra vector). The masters go
into the optimizer's state arrays (``master.<name>``), so a resume is exact although the model
directory holds the rounded weights; ``save_masters`` adds them for float32 parameters too (a
run that computes in float32 but saves in bf16: MindSpore on CPU).

``update_in_graph`` is the whole optimizer step (norm, finite check, clip, AdamW, zeroing) as a
function that a compiled train step inlines, so forward, backward and update run as one graph
with one host sync (see ``MindSporeBackend.train_step``).

Sliced update: on CPU the compiled whole-vector update keeps its element-wise temporaries
(measured: ~3 extra float32 vectors at 100M parameters, over 11 at 166M). A flat vector above
``SLICE_BYTES`` is therefore updated after the compiled step rather than inside it. On CPU
(``host_views``: a Tensor's ``asnumpy`` is its own memory there, and compiled graphs see what is
written into it) the update runs in place in that memory with NumPy (``host_adamw``): the
graph's float32 operations in its order, so the same bits, block by block in the cache, with
no kernel outputs and no write-back (measured at 40M values: 0.14-0.20 s against 1.1-1.8 s for
the compiled slices, bench/ms_sliced_adamw.py; MindSpore's fused ``ops.AdamWeightDecay``
kernel, 0.3-0.4 s, has no bias correction and needs the clip as another pass). The gradient
norm of a sliced vector on one process is summed there too. Where ``asnumpy`` copies (an
accelerator), each slice of at most a quarter of ``SLICE_BYTES`` (cut at whole rows of the
parameters, ``slice_plan``) is one compiled call (``adamw_math`` with the whole-vector graph's
float32 constants), one graph for every slice (shorter slices padded to its length), written
back into the flat vectors and the parameters.
"""

from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, ops

from mindrl.backends.mindspore.weights import write_param


def flatten(tensors):
    """Per-parameter tensors (``params`` order) -> one float32 vector (traced into graphs)."""
    parts = ()
    for t in tensors:
        parts = parts + (t.reshape(-1).astype(ms.float32),)
    return ops.concat(parts, 0)


def adamw_math(g, m, v, p32, lr, coef, bc1, bc2_sqrt, b1, b2, eps, wd):
    """One AdamW step on flat float32 vectors (the whole state, or one rank's slice of it:
    element-wise, so a slice updates exactly as it would inside the full vector). ``g`` is the
    summed gradient before clipping, ``coef`` the clip factor. -> (new p, new m, new v)."""
    g = g * coef
    m_new = m * b1 + g * (1.0 - b1)
    v_new = v * b2 + g * g * (1.0 - b2)
    p_new = p32 * (1.0 - lr * wd)
    p_new = p_new - (lr / bc1) * m_new / (ops.sqrt(v_new) / bc2_sqrt + eps)
    return p_new, m_new, v_new


def adamw_scalars(t: int, b1: float, b2: float, lr: float, clip: float, grad_norm: float):
    """The scalar inputs of AdamW step ``t`` (1-based), as float32 tensors: the learning rate,
    the global-norm clip coefficient and the two bias corrections (1 - b1^t, sqrt(1 - b2^t))."""
    coef = min(1.0, clip / (grad_norm + 1e-6)) if clip > 0 else 1.0
    f = lambda x: Tensor(np.float32(x))  # noqa: E731
    return f(lr), f(coef), f(1.0 - b1 ** t), f(np.sqrt(1.0 - b2 ** t))


# values per block of the host update: its two scratch rows and the block's four vectors
# stay in the core's cache between the block's dozen operations
HOST_BLOCK = 1 << 16


def host_adamw(g, m, v, p, scratch, coef, b1, omb1, b2, omb2, bc2_sqrt, eps, lr_bc1, decay):
    """``adamw_math`` in place on float32 NumPy vectors: ``m``, ``v`` and ``p`` become the new
    moments and weights, ``g`` (the summed gradient) becomes zeros. The scalars are float32:
    ``omb1`` = 1 - b1, ``omb2`` = 1 - b2, ``lr_bc1`` = lr / (1 - b1^t), ``decay`` = 1 - lr wd,
    each as the compiled graph computes it. Every operation is the graph's, on the same float32
    operands in the same order, so the bits are the graph's; block by block (``scratch``: (2,
    ``HOST_BLOCK``) float32), so each value is read from memory and written back once instead
    of once per operation, and no operation allocates."""
    n = g.shape[0]
    for lo in range(0, n, HOST_BLOCK):
        hi = min(n, lo + HOST_BLOCK)
        gb, mb, vb, pb = g[lo:hi], m[lo:hi], v[lo:hi], p[lo:hi]
        t, u = scratch[0, :hi - lo], scratch[1, :hi - lo]
        if coef != 1.0:
            gb *= coef                                  # g <- g coef
        mb *= b1                                        # m <- m b1 + g (1 - b1)
        np.multiply(gb, omb1, out=t)
        mb += t
        vb *= b2                                        # v <- v b2 + g g (1 - b2)
        np.multiply(gb, gb, out=t)
        t *= omb2
        vb += t
        np.sqrt(vb, out=t)                              # sqrt(v) / bc2 + eps
        t /= bc2_sqrt
        t += eps
        np.multiply(mb, lr_bc1, out=u)                  # (lr / bc1) m / that
        u /= t
        pb *= decay                                     # p <- p (1 - lr wd) - that
        pb -= u
        gb[...] = 0.0


NORM_BLOCK = 1 << 20    # values per dot product of the host gradient norm


def _host_array(t) -> Optional[np.ndarray]:
    """A flat NumPy array over ``t``'s own memory (CPU: ``asnumpy`` does not copy, and waits for
    the kernels queued before it), or None where ``asnumpy`` returns a copy."""
    if ms.get_context("device_target") != "CPU":
        return None
    a, b = t.asnumpy(), t.asnumpy()
    if a.ctypes.data != b.ctypes.data or not a.flags.writeable:
        return None
    return a.reshape(-1)


SLICE_BYTES = 64 << 20   # float32 bytes of one slice of the sliced update (large models)


def slice_plan(shapes, sizes, limit: int):
    """Cut the flat vector (parameters of ``shapes`` / ``sizes`` concatenated) into slices of
    at most ``limit`` values (one row of a parameter when a row alone is larger), each cut at
    whole rows of its parameters. -> [(lo, hi, [(param index, first row, end row, start in
    the slice, end in the slice), ...]), ...]; a 0-d parameter is one row of one value."""
    out, pieces, lo, pos = [], [], 0, 0
    for i, (shape, size) in enumerate(zip(shapes, sizes)):
        rows = int(shape[0]) if len(shape) else 1
        row = size // rows if rows else 0
        r = 0
        while r < rows:
            room = limit - (pos - lo)
            take = min(rows - r, max(room // row, 0 if pieces else 1))
            if take == 0:
                out.append((lo, pos, pieces))
                pieces, lo = [], pos
                continue
            pieces.append((i, r, r + take, pos - lo, pos - lo + take * row))
            pos += take * row
            r += take
    if pieces:
        out.append((lo, pos, pieces))
    return out


class AdamW:
    def __init__(self, params: List[Parameter], *, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, all_reduce: Optional[object] = None,
                 save_masters: bool = False, slice_bytes: Optional[int] = None):
        self.params = list(params)
        self.b1, self.b2 = float(betas[0]), float(betas[1])
        self.eps, self.wd = float(eps), float(weight_decay)
        self.shapes = [tuple(int(d) for d in p.shape) for p in self.params]
        self.sizes = [int(np.prod(s)) if len(s) else 1 for s in self.shapes]
        self.offsets = [0] + np.cumsum(self.sizes).tolist()
        n = int(self.offsets[-1])
        flat = lambda tag: Parameter(Tensor(np.zeros(n, np.float32)),  # noqa: E731
                                     name=f"adamw.{tag}", requires_grad=False)
        self.grad_flat = flat("grad_accum")
        self.m_flat = flat("exp_avg")
        self.v_flat = flat("exp_avg_sq")
        # float32 masters of low-precision parameters (None: the parameters are float32)
        self.master = None
        if any(p.dtype != ms.float32 for p in self.params):
            init = np.concatenate([p.astype(ms.float32).asnumpy().reshape(-1)
                                   for p in self.params]) if n else np.zeros(0, np.float32)
            self.master = Parameter(Tensor(init.astype(np.float32)), name="adamw.master",
                                    requires_grad=False)
        self.save_masters = bool(save_masters) or self.master is not None
        self.step = 0                     # completed updates (host side; bias corrections)
        self._all_reduce = all_reduce     # ops.AllReduce(SUM) under data parallelism
        # above one slice: the update runs slice by slice (its temporaries are a few slices, not
        # ~3 whole vectors), outside the train step's graph (``sliced``)
        limit = max(1, int(SLICE_BYTES if slice_bytes is None else slice_bytes) // 4)
        self.sliced, self._limit = n > limit, limit
        # slices of a quarter of that: a compiled slice graph holds several slices of pool
        # memory after its first call (measured on CPU, 100M values, 2 graphs: 0.26 GB in
        # all at 16 MiB slices, 1.1-1.3 GB at 64 MiB)
        self._slices = slice_plan(self.shapes, self.sizes, max(1, limit // 4)) \
            if self.sliced else []
        self._build_graph_pieces()
        self._reduce_and_norm = ms.jit(self._reduce_and_norm_impl)
        self._update = ms.jit(self._update_impl)
        self._zero = ms.jit(self._zero_impl)
        accumulate = self.accumulate_in_graph

        def add(grads):
            accumulate(grads)
            return ops.zeros((), ms.float32)
        self._add = ms.jit(add)

    # --- pieces that compiled functions inline ----------------------------------------------
    # Built as closures over plain locals (Parameters, tuples, floats): MindSpore's parser
    # fails to resolve a method of a plain Python object when a jitted caller recompiles for a
    # second shape ("'Function' object has no attribute ..."), closures recompile fine.
    def _build_graph_pieces(self):
        params, shapes, sizes = tuple(self.params), tuple(self.shapes), tuple(self.sizes)
        grad_flat, m_flat, v_flat, master = self.grad_flat, self.m_flat, self.v_flat, self.master
        b1, b2, eps, wd = self.b1, self.b2, self.eps, self.wd
        many = len(sizes) > 1

        def accumulate(grads):
            """grad accumulator += the gradients (a tuple in ``params`` order)."""
            ops.assign_add(grad_flat, flatten(grads))
            return grad_flat

        def adamw(g, lr, coef, bc1, bc2_sqrt):
            """The AdamW arithmetic on flat vectors -> (params f32, new params, new m, new v)."""
            p32 = master.value() if master is not None else flatten([p.value() for p in params])
            p_new, m_new, v_new = adamw_math(g, m_flat.value(), v_flat.value(), p32, lr, coef,
                                             bc1, bc2_sqrt, b1, b2, eps, wd)
            return p32, p_new, m_new, v_new

        def write_params(p_flat):
            """The float32 weights ``p_flat`` into the masters, and rounded into the params."""
            if master is not None:
                ops.assign(master, p_flat)
            pieces = ops.split(p_flat, list(sizes), 0) if many else (p_flat,)
            i = 0
            for p in params:
                ops.assign(p, pieces[i].reshape(shapes[i]).astype(p.dtype))
                i = i + 1
            return p_flat

        def update(g, loss, lr, clip, bc1, bc2_sqrt):
            """The whole optimizer step on the total gradient ``g`` (flat): global norm, skip
            unless the norm and ``loss`` are finite, clip (``clip`` <= 0: off), AdamW, zero the
            accumulator. Returns (grad norm, 1.0 if updated else 0.0)."""
            norm = ops.sqrt((g * g).sum())
            finite = ops.logical_and(ops.isfinite(norm), ops.isfinite(loss))
            coef = ops.minimum(clip / (norm + 1e-6), 1.0)
            coef = ops.where(clip > 0.0, coef, ops.ones_like(coef))
            p32, p_new, m_new, v_new = adamw(g, lr, coef, bc1, bc2_sqrt)
            ops.assign(m_flat, ops.where(finite, m_new, m_flat.value()))
            ops.assign(v_flat, ops.where(finite, v_new, v_flat.value()))
            write_params(ops.where(finite, p_new, p32))
            ops.assign(grad_flat, ops.zeros_like(grad_flat))
            return norm, finite.astype(ms.float32)

        def slice_update(g, m, v, p32, lr, coef, bc1, bc2_sqrt):
            """``adamw_math`` on one slice, compiled: its Python float constants fold to
            float32 as in the whole-vector graph."""
            return adamw_math(g, m, v, p32, lr, coef, bc1, bc2_sqrt, b1, b2, eps, wd)

        self.flatten, self.accumulate_in_graph, self.update_in_graph = flatten, accumulate, update
        self._adamw, self._write_params = adamw, write_params
        self._slice_update = ms.jit(slice_update)

    # --- compiled pieces of the separate (data-parallel / split) path --------------------------
    def _reduce_and_norm_impl(self):
        g = self.grad_flat.value()
        if self._all_reduce is not None:
            g = self._all_reduce(g)
            ops.assign(self.grad_flat, g)
        return ops.sqrt((g * g).sum())

    def _update_impl(self, lr, coef, bc1, bc2_sqrt):
        _, p_new, m_new, v_new = self._adamw(self.grad_flat.value(), lr, coef, bc1, bc2_sqrt)
        ops.assign(self.m_flat, m_new)
        ops.assign(self.v_flat, v_new)
        self._write_params(p_new)
        ops.assign(self.grad_flat, ops.zeros_like(self.grad_flat))
        return lr

    def _zero_impl(self):
        ops.assign(self.grad_flat, ops.zeros_like(self.grad_flat))
        return ops.zeros((), ms.float32)

    # --- host API --------------------------------------------------------------------------
    def hyper(self, lr: float, clip: float) -> Tensor:
        """(lr, clip, 1 - b1^t, sqrt(1 - b2^t)) for the next update t = step + 1, one tensor."""
        t = self.step + 1
        return Tensor(np.array([lr, clip, 1.0 - self.b1 ** t, np.sqrt(1.0 - self.b2 ** t)],
                               np.float32))

    def add_gradients(self, grads) -> None:
        """Add one micro-batch's per-parameter gradients (``params`` order) to the accumulator,
        as a compiled micro-batch step does."""
        self._add(tuple(grads))

    def grad_norm(self) -> float:
        """All-reduce (when data parallel) the accumulated gradients; their global L2 norm.
        A sliced vector on one process: summed on the host in its own memory (float32 dot
        products of 1M-value blocks, added in float64), no kernel output."""
        if self.sliced and self._all_reduce is None:
            g = _host_array(self.grad_flat)
            if g is not None:
                total = 0.0
                for lo in range(0, g.shape[0], NORM_BLOCK):
                    b = g[lo:lo + NORM_BLOCK]
                    total += float(np.dot(b, b))
                return float(np.sqrt(total))
        return float(self._reduce_and_norm().asnumpy())

    def apply(self, lr: float, clip: float, grad_norm: float) -> None:
        """One AdamW update from the accumulated gradients, which are then zeroed."""
        scalars = adamw_scalars(self.step + 1, self.b1, self.b2, lr, clip, grad_norm)
        if self.sliced:
            self._apply_sliced(*scalars)
        else:
            self._update(*scalars)
        self.step += 1

    def host_views(self) -> Optional[Dict[str, np.ndarray]]:
        """NumPy arrays over the storage of the flat float32 vectors (gradient accumulator,
        moments, masters) and of the float32 parameters (``p<i>``, flat), or None where
        ``asnumpy`` copies (an accelerator's memory): on CPU a Tensor's ``asnumpy`` is its own
        memory, and compiled graphs read and write that memory (tests check both). ``asnumpy``
        waits for the kernels queued before it."""
        named = {"g": self.grad_flat, "m": self.m_flat, "v": self.v_flat}
        if self.master is not None:
            named["master"] = self.master
        for i, p in enumerate(self.params):
            if p.dtype == ms.float32:
                named[f"p{i}"] = p
        out = {}
        for k, t in named.items():
            a = _host_array(t)
            if a is None:
                return None                       # copies: the compiled slices instead
            out[k] = a
        return out

    def _apply_sliced(self, lr, coef, bc1, bc2_sqrt, host: Optional[bool] = None) -> None:
        """The update of ``_update`` one slice at a time (``slice_plan``). On CPU (``host``
        None or True) in place in the vectors' own memory (``host_adamw``): no kernel output,
        no write-back, the gradient zeroed in the same pass; low-precision parameters then get
        their slices' masters rounded. Elsewhere (or ``host=False``) each slice's arithmetic is
        one compiled call (``_slice_update``), written back into the flat vectors and the
        parameters' rows. Both are the whole-vector graph's float32 operations in its order:
        the same bits."""
        views = self.host_views() if host is not False else None
        if host and views is None:
            raise RuntimeError("AdamW: the flat vectors have no host memory to update in place")
        if views is None:
            return self._apply_sliced_compiled(lr, coef, bc1, bc2_sqrt)
        k = self._host_constants(lr, coef, bc1, bc2_sqrt)
        scratch = getattr(self, "_scratch", None)
        if scratch is None:
            scratch = self._scratch = np.empty((2, HOST_BLOCK), np.float32)
        g, m, v = views["g"], views["m"], views["v"]
        for lo, hi, pieces in self._slices:
            for i, r0, r1, a, b in pieces:
                s0, s1 = lo + a, lo + b
                if self.master is not None:
                    p32 = views["master"][s0:s1]
                else:
                    row = self.sizes[i] // (self.shapes[i][0] if len(self.shapes[i]) else 1)
                    p32 = views[f"p{i}"][r0 * row:r1 * row]
                host_adamw(g[s0:s1], m[s0:s1], v[s0:s1], p32, scratch, *k)
            if self.master is not None:             # the rounded masters into the parameters
                for i, r0, r1, a, b in pieces:
                    p = self.params[i]
                    # shaped in NumPy: ``reshape`` of a Tensor made from a NumPy array
                    # fails here (MindSpore 2.10 with NumPy 2)
                    rows = views["master"][lo + a:lo + b].reshape(
                        (r1 - r0,) + self.shapes[i][1:] if len(self.shapes[i]) else ())
                    piece = Tensor(rows).astype(p.dtype)
                    if len(self.shapes[i]):
                        p[r0:r1] = piece
                    else:
                        ops.assign(p, piece)

    def _host_constants(self, lr, coef, bc1, bc2_sqrt):
        """``host_adamw``'s float32 scalars, each computed as the compiled graph computes it
        (float32 operations on float32 operands)."""
        f = np.float32
        lr, coef, bc1, bc2 = (f(x.asnumpy()) for x in (lr, coef, bc1, bc2_sqrt))
        b1, b2, eps, wd = f(self.b1), f(self.b2), f(self.eps), f(self.wd)
        return (coef, b1, f(1.0) - b1, b2, f(1.0) - b2, bc2, eps, lr / bc1,
                f(1.0) - lr * wd)

    def _apply_sliced_compiled(self, lr, coef, bc1, bc2_sqrt) -> None:
        """The sliced update through compiled slice graphs (``_apply_sliced`` where the
        vectors have no host memory): each slice's AdamW arithmetic (``_slice_update``) and
        its write-back into the flat vectors and the parameters' rows (in place: compiled
        steps see it)."""
        f32 = ms.float32
        width = max(hi - lo for lo, hi, _ in self._slices)
        zeros = getattr(self, "_zero_slice", None)    # read only: pads, and clears the slices
        if zeros is None:
            zeros = self._zero_slice = Tensor(np.zeros(int(width), np.float32))

        def math_fn(g, m, v, p32, *scalars):
            n = int(g.shape[0])
            if n == width:
                return self._slice_update(g, m, v, p32, *scalars)
            # a shorter slice, padded with zeros to the one compiled length (zeros step to
            # zeros) and cut back: one graph for every slice
            pad = zeros[:width - n]
            outs = self._slice_update(*(ops.concat((x, pad), 0) for x in (g, m, v, p32)),
                                      *scalars)
            return tuple(x[:n] for x in outs)

        # no copy, cast or concatenation where a slice is one float32 piece (the head's rows):
        # each is a pass over the slice's memory, and the update is memory-bound
        for lo, hi, pieces in self._slices:
            n = hi - lo
            if self.master is not None:
                p32 = self.master[lo:hi]
            else:
                rows = [self._rows(i, r0, r1).reshape(-1) for i, r0, r1, _, _ in pieces]
                rows = [x if x.dtype == f32 else x.astype(f32) for x in rows]
                p32 = rows[0] if len(rows) == 1 else ops.concat(tuple(rows), 0)
            p_new, m_new, v_new = math_fn(self.grad_flat[lo:hi], self.m_flat[lo:hi],
                                          self.v_flat[lo:hi], p32, lr, coef, bc1, bc2_sqrt)
            self.m_flat[lo:hi] = m_new
            self.v_flat[lo:hi] = v_new
            if self.master is not None:
                self.master[lo:hi] = p_new
            for i, r0, r1, a, b in pieces:
                p = self.params[i]
                piece = (p_new if (a, b) == (0, n) else p_new[a:b]).reshape(
                    (r1 - r0,) + self.shapes[i][1:])
                if p.dtype != f32:
                    piece = piece.astype(p.dtype)
                if len(self.shapes[i]):
                    p[r0:r1] = piece
                else:
                    ops.assign(p, piece.reshape(()))
            self.grad_flat[lo:hi] = zeros if n == width else zeros[:n]

    def _rows(self, i: int, r0: int, r1: int):
        p = self.params[i]
        return p[r0:r1] if len(self.shapes[i]) else p.reshape((1,))

    def zero_grad(self) -> None:
        self._zero()

    def state_nbytes(self) -> Dict[str, int]:
        """Bytes of the optimizer arrays this process holds, by name."""
        out = {"grad_accum": self.grad_flat.nbytes, "exp_avg": self.m_flat.nbytes,
               "exp_avg_sq": self.v_flat.nbytes}
        if self.master is not None:
            out["master"] = self.master.nbytes
        return {k: int(v) for k, v in out.items()}

    def _split(self, flat: np.ndarray) -> List[np.ndarray]:
        return [flat[a:b].reshape(s) for a, b, s in
                zip(self.offsets[:-1], self.offsets[1:], self.shapes)]

    def grad_arrays(self) -> List[np.ndarray]:
        """The accumulated gradient of each parameter (``params`` order), float32 copies."""
        return [a.copy() for a in self._split(self.grad_flat.asnumpy())]

    # --- state -----------------------------------------------------------------------------
    def master_arrays(self) -> List[np.ndarray]:
        """The float32 weights AdamW steps, per parameter (``params`` order): the masters, or
        the float32 parameters themselves."""
        if self.master is not None:
            return [a.copy() for a in self._split(self.master.asnumpy())]
        return [p.astype(ms.float32).asnumpy() for p in self.params]

    def state_arrays(self) -> Dict[str, np.ndarray]:
        out = {}
        if self.save_masters:
            for p, w in zip(self.params, self.master_arrays()):
                out[f"master.{p.name}"] = np.ascontiguousarray(w)
        ms_, vs_ = self._split(self.m_flat.asnumpy()), self._split(self.v_flat.asnumpy())
        for p, m, v in zip(self.params, ms_, vs_):
            out[f"exp_avg.{p.name}"] = np.ascontiguousarray(m)
            out[f"exp_avg_sq.{p.name}"] = np.ascontiguousarray(v)
        return out

    def load_state_arrays(self, arrays: Dict[str, np.ndarray], step: int) -> None:
        cat = lambda tag: np.concatenate(  # noqa: E731
            [np.asarray(arrays[f"{tag}.{p.name}"], np.float32).reshape(-1) for p in self.params])
        write_param(self.m_flat, cat("exp_avg"))          # in place: compiled steps see it
        write_param(self.v_flat, cat("exp_avg_sq"))
        if all(f"master.{p.name}" in arrays for p in self.params):
            self.load_master_arrays(cat("master"))
        self.step = int(step)

    def set_masters(self, named: Iterable[Tuple[str, np.ndarray]]
                    ) -> Iterator[Tuple[str, np.ndarray]]:
        """Pass (name, array) pairs through (to :func:`~mindrl.backends.mindspore.weights.
        load_into`), copying those of trained parameters into the float32 masters at the
        arrays' own precision (a float32 checkpoint keeps it); the masters are written when
        the pairs run out. Without masters: the pairs unchanged."""
        if self.master is None:
            yield from named
            return
        index = {p.name: i for i, p in enumerate(self.params)}
        flat = self.master.asnumpy().copy()
        for name, arr in named:
            i = index.get(name)
            if i is not None and np.size(arr) == self.sizes[i]:
                flat[self.offsets[i]:self.offsets[i + 1]] = np.asarray(arr, np.float32).reshape(-1)
            yield name, arr
        write_param(self.master, flat)

    def load_master_arrays(self, flat: np.ndarray) -> None:
        """Set the float32 weights (flat, ``params`` order): the masters, and every parameter
        to its master rounded (in place: compiled steps see it)."""
        flat = np.asarray(flat, np.float32)
        if self.master is not None:
            write_param(self.master, flat)
        for p, w in zip(self.params, self._split(flat)):
            write_param(p, w)
