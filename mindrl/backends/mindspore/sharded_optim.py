"""AdamW with its float32 state sharded over the data-parallel ranks (ZeRO stage 1), and the
checkpoint files of that state.

The replicated :class:`~mindrl.backends.mindspore.optim.AdamW` keeps, on every rank, the flat
float32 moments (8 bytes per parameter) and, for low-precision parameters, float32 masters (4).
Here the flat vector of ``n`` values is cut into ``world`` equal slices of ``s = ceil(n / world)``
(the last one padded with zeros); rank ``r`` owns ``[r s, (r + 1) s)`` and holds the moments and
masters of that slice only, and the float32 gradient summed over the ranks for that slice
(ZeRO stage 2). The slice is cut into chunks of at most ``BUCKET_BYTES / 4 / world`` values;
chunk k of every rank's slice, in rank order, is bucket k (at most ``BUCKET_BYTES`` of float32).

1. each micro-batch (inside its compiled step): per bucket, the rank's own gradient values of
   the bucket's ``world`` chunks go into one float32 buffer, ``ReduceScatter(SUM)`` returns this
   rank's chunk of the sum (on CPU, where MindSpore has no ReduceScatter kernel: ``AllReduce``
   and slice), added into the rank's gradient slice. No rank holds a full float32 gradient
   accumulator; the transient is one bucket. A rank with fewer micro-batches than the others
   runs the same collectives on zeros (:meth:`ShardedAdamW.reduce_nothing`);
2. global norm: ``AllReduce`` of the slices' squared sums, so clipping and the skip of a
   non-finite step see the whole gradient (a NaN anywhere makes every rank's norm NaN);
3. :func:`~mindrl.backends.mindspore.optim.adamw_math` on the slice: the same element-wise
   arithmetic as the replicated step, so a slice updates exactly as it would inside the full
   vector (the sums differ in order only: ranks' micro-batches are summed per micro-batch,
   not per rank, and the norm's summation order);
4. per bucket, ``AllGather`` of every rank's new chunk, cast to the parameters' dtype first
   (bf16 on a device: half the traffic); a parameter is written into every rank's full
   parameters as soon as its last piece has arrived (a large parameter, the embedding, waits
   for its buckets' pieces; nothing holds the full gathered vector).

Parameters stay replicated (every rank runs the whole forward and backward). Per parameter and
rank that is 2 (bf16 weights) + 16 / world bytes, against 2 + 4 + 12 replicated.

Checkpoints: one file per rank's slice, ``ms_optimizer.shard{r}-of-{world}.safetensors``
(flat ``exp_avg``, ``exp_avg_sq`` and, when masters are saved, ``master``; the slice's bounds in
the metadata), written by each rank, or all by rank 0 after :meth:`ShardedAdamW.gather_shards`
(the trainer's checkpoints, which rank 0 alone writes). A run on any number of ranks reads back only the ranges it owns, from whichever
files hold them (a byte-range read, never the whole state on one rank); a replicated run reads
all slices, and a sharded run can start from a replicated checkpoint.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, ops

from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.optim import adamw_math, adamw_scalars, flatten
from mindrl.backends.mindspore.weights import write_param
from mindrl.backends import shard_layout as L
from mindrl.backends.shard_layout import bucket_chunks, shard_bounds  # noqa: F401 (re-exported)

# float32 bytes of gradient one reduce moves; set before building a ShardedAdamW to change it
BUCKET_BYTES = L.BUCKET_BYTES

SHARD_FORMAT = "mindrl-mindspore-shard"
_SHARD_RE = re.compile(r"ms_optimizer\.shard(\d+)-of-(\d+)\.safetensors$")
TAGS = ("exp_avg", "exp_avg_sq", "master")


def shard_file(rank: int, world: int) -> str:
    return f"ms_optimizer.shard{rank:05d}-of-{world:05d}.safetensors"


class ShardedAdamW:
    """AdamW over ``params`` whose gradient accumulator, moments and masters hold this rank's
    slice only.

    The host API is the replicated optimizer's data-parallel path: ``accumulate_in_graph`` /
    ``flatten`` (called by the compiled micro-batch steps), ``grad_norm()`` (the global norm),
    ``apply(lr, clip, grad_norm)``, ``zero_grad()`` and ``step``; ``reduce_nothing()`` stands
    in for a micro-batch a rank does not have (its collectives with a zero gradient). There is
    no in-graph update (``update_in_graph`` is None) and no full accumulator (``grad_flat`` is
    None). ``reduce_scatter``: use ``ReduceScatter`` (Ascend / GPU) instead of ``AllReduce`` +
    slice (CPU). ``bucket_bytes``: float32 bytes one reduce moves (``world`` chunks of
    ``bucket_bytes / 4 / world`` values); a gather moves as many values in the weights' dtype."""

    sharded = True
    grad_flat = None
    update_in_graph = None

    def __init__(self, params: List[Parameter], *, rank: int, world: int, betas=(0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, reduce_scatter: bool = False,
                 save_masters: bool = False, bucket_bytes: Optional[int] = None):
        self.params = list(params)
        self.rank, self.world = int(rank), int(world)
        self.b1, self.b2 = float(betas[0]), float(betas[1])
        self.eps, self.wd = float(eps), float(weight_decay)
        self.shapes = [tuple(int(d) for d in p.shape) for p in self.params]
        self.sizes = [int(np.prod(s)) if len(s) else 1 for s in self.shapes]
        self.offsets = [0] + np.cumsum(self.sizes).tolist()
        self.n = n = int(self.offsets[-1])
        self.shard, self.lo, self.hi = shard_bounds(n, self.world, self.rank)
        self.bucket_bytes = int(BUCKET_BYTES if bucket_bytes is None else bucket_bytes)
        self.chunks = L.bucket_chunks(self.shard, self.world, self.bucket_bytes)
        flat = lambda tag, size: Parameter(Tensor(np.zeros(size, np.float32)),  # noqa: E731
                                           name=f"adamw.{tag}", requires_grad=False)
        # the summed gradient of this rank's slice, one Parameter per bucket chunk
        self.grad_chunks = [flat(f"grad_shard.{k}", b - a) for k, (a, b) in
                            enumerate(self.chunks)]
        self.m_flat = flat("exp_avg", self.shard)
        self.v_flat = flat("exp_avg_sq", self.shard)
        self.master = None
        if any(p.dtype != ms.float32 for p in self.params):
            self.master = flat("master", self.shard)
            write_param(self.master, self._slice_of_params())
        self.save_masters = bool(save_masters) or self.master is not None
        dtypes = {p.dtype for p in self.params}
        self.gather_dtype = dtypes.pop() if len(dtypes) == 1 else ms.float32
        self.step = 0
        self._all_reduce = ops.AllReduce(ops.ReduceOp.SUM)
        self._all_gather = ops.AllGather()
        self._reduce_scatter = ops.ReduceScatter(ops.ReduceOp.SUM) if reduce_scatter else None
        self._build_graph_pieces()
        self._norm = ms.jit(self._norm_fn)
        self._update = ms.jit(self._update_fn)
        self._publish = ms.jit(self._publish_fn)
        self._zero = ms.jit(self._zero_fn)
        self._nothing = ms.jit(self._nothing_fn)
        self._add = ms.jit(self._add_fn)

    def _slice_of_params(self) -> np.ndarray:
        """This rank's slice of the parameters as float32 (padded), one parameter at a time
        (never the whole model in one host array)."""
        out = np.zeros(self.shard, np.float32)
        for p, a, b in zip(self.params, self.offsets[:-1], self.offsets[1:]):
            x, y = max(a, self.lo), min(b, self.hi)
            if x < y:
                flat = p.astype(ms.float32).asnumpy().reshape(-1)
                out[x - self.lo:y - self.lo] = flat[x - a:y - a]
        return out

    def _pieces(self, lo: int, hi: int):
        """Values ``[lo, hi)`` of the padded flat vector as static pieces (shard_layout)."""
        return L.pieces(self.offsets, lo, hi)

    # --- compiled pieces (closures over plain locals, as in optim.py) --------------------------
    def _build_graph_pieces(self):
        params, shapes = tuple(self.params), tuple(self.shapes)
        grad_chunks = tuple(self.grad_chunks)
        m_flat, v_flat, master = self.m_flat, self.v_flat, self.master
        b1, b2, eps, wd = self.b1, self.b2, self.eps, self.wd
        s, world, rank = self.shard, self.world, self.rank
        chunks = tuple(self.chunks)
        all_reduce, all_gather, reduce_scatter = (self._all_reduce, self._all_gather,
                                                  self._reduce_scatter)
        gather_dtype = self.gather_dtype
        # bucket k: chunk k of every rank's slice, in rank order (what one reduce moves)
        buckets = tuple(tuple(self._pieces(r * s + a, r * s + b) for r in range(world))
                        for a, b in chunks)
        mine_pieces = self._pieces(rank * s, rank * s + s)
        # the gather: which (bucket, rank) pieces make each parameter, and after which bucket
        # it is complete (then written, and its pieces freed)
        complete_after = L.gather_schedule(self.sizes, world, self.bucket_bytes)[3]
        # cuts[k]: the (start, end) pieces cut from bucket k, numbered in cut order;
        # written[k]: (parameter, the numbers of its pieces) written after bucket k;
        # after_cuts[k]: the pieces of bucket k - 1 that bucket k's gather waits for
        arrivals = [[] for _ in chunks]
        for done in complete_after:
            for i, ps in done:
                for k, u, w in ps:
                    arrivals[k].append((i, u, w))
        number, cuts, after_cuts = {}, [], []
        for k, arr in enumerate(arrivals):
            after_cuts.append(tuple(range(len(number) - len(arrivals[k - 1]), len(number)))
                              if k else ())
            cuts.append(tuple((u, w) for _, u, w in arr))
            for i, u, w in arr:
                number[(i, k, u)] = len(number)
        written = tuple(tuple((i, tuple(number[(i, k, u)] for k, u, _ in ps)) for i, ps in done)
                        for done in complete_after)
        cuts, after_cuts = tuple(cuts), tuple(after_cuts)

        def gather_pieces(tensors, pieces):
            """The float32 values ``pieces`` name, from per-parameter ``tensors``."""
            parts = ()
            for i, x, y in pieces:
                if i < 0:
                    parts = parts + (ops.zeros((y,), ms.float32),)
                else:
                    parts = parts + (tensors[i].reshape(-1)[x:y].astype(ms.float32),)
            return ops.concat(parts, 0) if len(parts) > 1 else parts[0]

        def reduce_into_slice(grads):
            """Each bucket of one micro-batch's gradients (``grads``; None: zeros) summed over
            the ranks, this rank's chunk added into its slice (ReduceScatter; AllReduce +
            slice on CPU). Returns the last bucket's sum."""
            k = 0
            prev = None
            for a, b in chunks:
                if grads is None:
                    buf = ops.zeros(((b - a) * world,), ms.float32)
                else:
                    buf = ops.concat(tuple(gather_pieces(grads, buckets[k][r])
                                           for r in range(world)), 0)
                if prev is not None:            # every rank issues the buckets in one order
                    buf = ops.depend(buf, prev)
                if reduce_scatter is not None:
                    prev = reduce_scatter(buf)
                    mine = prev
                else:
                    prev = all_reduce(buf)
                    mine = prev[rank * (b - a):(rank + 1) * (b - a)]
                ops.assign_add(grad_chunks[k], mine)
                k = k + 1
            return prev

        def accumulate(grads):
            """This micro-batch's gradients, summed over the ranks, into this rank's slice."""
            return reduce_into_slice(grads)

        def nothing():
            """The reduces of a micro-batch with a zero gradient, for a rank with fewer
            micro-batches than the others: it still receives the others' sums."""
            return reduce_into_slice(None).sum()

        def grad_slice():
            if len(grad_chunks) == 1:
                return grad_chunks[0].value()
            return ops.concat(tuple(g.value() for g in grad_chunks), 0)

        def norm():
            g = grad_slice()
            return ops.sqrt(all_reduce((g * g).sum().reshape((1,))))   # global norm

        def publish(p_slice):
            """Every rank's new float32 slice -> the full parameters of every rank, one bucket
            at a time: each gathered bucket is cut into its parameters' pieces at once (so it
            can be freed), and a parameter is written once its last piece has arrived."""
            cut = ()
            got = p_slice
            k = 0
            for a, b in chunks:
                piece = p_slice[a:b].astype(gather_dtype)
                piece = ops.depend(piece, got)  # every rank issues the buckets in one order,
                for j in after_cuts[k]:         # each after the last one was cut
                    piece = ops.depend(piece, cut[j])
                got = all_gather(piece)
                for u, w in cuts[k]:
                    cut = cut + (got[u:w],)
                for i, idx in written[k]:
                    parts = ()
                    for j in idx:
                        parts = parts + (cut[j],)
                    full = ops.concat(parts, 0) if len(parts) > 1 else parts[0]
                    ops.assign(params[i], full.reshape(shapes[i]).astype(params[i].dtype))
                k = k + 1
            return p_slice

        def my_weights():
            """This rank's slice of the float32 weights: the masters, or the parameters."""
            if master is not None:
                return master.value()
            return gather_pieces(tuple(p.value() for p in params), mine_pieces)

        def zero():
            for g in grad_chunks:
                ops.assign(g, ops.zeros_like(g))
            return ops.zeros((), ms.float32)

        def update(lr, coef, bc1, bc2_sqrt):
            p_new, m_new, v_new = adamw_math(grad_slice(), m_flat.value(), v_flat.value(),
                                             my_weights(), lr, coef, bc1, bc2_sqrt,
                                             b1, b2, eps, wd)
            ops.assign(m_flat, m_new)
            ops.assign(v_flat, v_new)
            if master is not None:
                ops.assign(master, p_new)
            publish(p_new)
            zero()
            return lr

        def add(grads):
            accumulate(grads)
            return ops.zeros((), ms.float32)

        self.flatten, self.accumulate_in_graph = flatten, accumulate
        self._norm_fn, self._update_fn, self._nothing_fn = norm, update, nothing
        self._publish_fn, self._zero_fn, self._my_weights = publish, zero, my_weights
        self._add_fn = add

    # --- host API (the replicated optimizer's data-parallel path) ------------------------------
    def add_gradients(self, grads: Sequence[Tensor]) -> None:
        """Add one micro-batch's per-parameter gradients (``params`` order) as a compiled step
        does (collective: all ranks call it)."""
        self._add(tuple(grads))

    def reduce_nothing(self) -> None:
        """The collectives of one micro-batch with a zero gradient (collective)."""
        self._nothing()

    def grad_norm(self) -> float:
        """The global L2 norm of the summed gradient (the slices' squares all-reduced)."""
        return float(self._norm().asnumpy()[0])

    def apply(self, lr: float, clip: float, grad_norm: float) -> None:
        """One AdamW update of this rank's slice from the summed gradient, then every rank's
        new weights gathered into the parameters, bucket by bucket (collective: all ranks
        call it). The gradient slice is zeroed."""
        self._update(*adamw_scalars(self.step + 1, self.b1, self.b2, lr, clip, grad_norm))
        self.step += 1

    def zero_grad(self) -> None:
        self._zero()

    def grad_slice(self) -> np.ndarray:
        """The summed gradient of this rank's slice (padded), float32."""
        return np.concatenate([g.asnumpy() for g in self.grad_chunks])

    def grad_arrays(self) -> List[np.ndarray]:
        raise RuntimeError("train.shard_optimizer: each micro-batch's gradient is reduced into "
                           "the ranks' slices, no rank holds its own full gradient; "
                           "gradients() needs train.shard_optimizer=false")

    def state_nbytes(self) -> Dict[str, int]:
        """Bytes of the optimizer arrays this rank holds, by name."""
        out = {"grad_accum": sum(g.nbytes for g in self.grad_chunks),
               "exp_avg": self.m_flat.nbytes, "exp_avg_sq": self.v_flat.nbytes}
        if self.master is not None:
            out["master"] = self.master.nbytes
        return {k: int(v) for k, v in out.items()}

    # --- state -------------------------------------------------------------------------------
    def shard_arrays(self) -> Dict[str, np.ndarray]:
        """This rank's real values (padding dropped) of each flat state vector."""
        k = self.hi - self.lo
        out = {"exp_avg": self.m_flat.asnumpy()[:k], "exp_avg_sq": self.v_flat.asnumpy()[:k]}
        if self.save_masters:
            out["master"] = self._my_weights().asnumpy()[:k]
        return {t: np.ascontiguousarray(a, np.float32) for t, a in out.items()}

    def set_masters(self, named: Iterable[Tuple[str, np.ndarray]]
                    ) -> Iterator[Tuple[str, np.ndarray]]:
        """Pass (name, array) pairs through (to :func:`~mindrl.backends.mindspore.weights.
        load_into`), copying the part of each trained parameter's array that falls in this
        rank's slice into the float32 masters, at the array's own precision (a float32
        checkpoint keeps it); the masters are written when the pairs run out. Without masters:
        the pairs unchanged. The replicated optimizer's method of the same name, sliced."""
        if self.master is None:
            yield from named
            return
        index = {p.name: i for i, p in enumerate(self.params)}
        mine = self.master.asnumpy().copy()
        for name, arr in named:
            i = index.get(name)
            if i is not None and np.size(arr) == self.sizes[i]:
                a, b = self.offsets[i], self.offsets[i + 1]
                x, y = max(a, self.lo), min(b, self.hi)
                if x < y:
                    flat = np.asarray(arr, np.float32).reshape(-1)
                    mine[x - self.lo:y - self.lo] = flat[x - a:y - a]
            yield name, arr
        write_param(self.master, mine)

    def gather_shards(self, chunk: int = 1 << 22) -> Optional[List[Dict[str, np.ndarray]]]:
        """Every rank's :meth:`shard_arrays` on rank 0 (None on the others), so that rank 0
        alone can write the checkpoint (the trainer's way). Collective: all ranks call it. The
        slices travel in AllGathers of ``chunk`` values, so no device holds more than
        ``world * chunk`` extra values; rank 0's host holds the whole state once."""
        vectors = [("exp_avg", self.m_flat), ("exp_avg_sq", self.v_flat)]
        if self.save_masters:
            vectors.append(("master", self._my_weights()))
        out = [dict() for _ in range(self.world)] if self.rank == 0 else None
        for tag, vec in vectors:
            parts = []
            for a in range(0, self.shard, chunk):
                rows = self._all_gather(vec[a:a + chunk]).asnumpy()
                if out is not None:
                    parts.append(rows.reshape(self.world, -1))
            if out is not None:
                rows = np.concatenate(parts, axis=1)
                for r in range(self.world):
                    _, lo, hi = shard_bounds(self.n, self.world, r)
                    out[r][tag] = np.ascontiguousarray(rows[r, :hi - lo], np.float32)
        return out

    def load_slices(self, slices: Dict[str, Optional[np.ndarray]], step: int) -> None:
        """Set this rank's slices (``[lo, hi)`` of each flat vector; ``master`` may be None)
        and, when masters are given, the full parameters from every rank's masters
        (collective: all ranks call it)."""
        write_param(self.m_flat, self._pad(slices["exp_avg"]))
        write_param(self.v_flat, self._pad(slices["exp_avg_sq"]))
        if slices.get("master") is not None:
            mine = self._pad(slices["master"])
            if self.master is not None:
                write_param(self.master, mine)
            self._publish(Tensor(mine))
        self.step = int(step)

    def _pad(self, arr: np.ndarray) -> np.ndarray:
        arr = np.asarray(arr, np.float32).reshape(-1)
        if arr.size != self.hi - self.lo:
            raise ValueError(f"optimizer slice has {arr.size} values, rank {self.rank} owns "
                             f"{self.hi - self.lo}")
        out = np.zeros(self.shard, np.float32)
        out[:arr.size] = arr
        return out


# --- checkpoint files -------------------------------------------------------------------------
REPLICATED_FILE = "ms_optimizer.safetensors"


def save_shard(opt: ShardedAdamW, directory: str, rank: Optional[int] = None,
               arrays: Optional[Dict[str, np.ndarray]] = None) -> None:
    """The slices of ``rank`` (default: this rank's own) into ``directory``; ``arrays`` are
    that rank's :meth:`ShardedAdamW.shard_arrays` (as :meth:`ShardedAdamW.gather_shards`
    returns them), read from this rank's optimizer when not given."""
    rank = opt.rank if rank is None else rank
    _, lo, hi = shard_bounds(opt.n, opt.world, rank)
    meta = {"format": SHARD_FORMAT, "n": str(opt.n), "lo": str(lo), "hi": str(hi),
            "rank": str(rank), "world": str(opt.world)}
    W.write_safetensors(str(Path(directory) / shard_file(rank, opt.world)),
                        opt.shard_arrays() if arrays is None else arrays, "float32",
                        metadata=meta)


def _shard_paths(directory: str, world: int) -> List[Path]:
    paths = [Path(directory) / shard_file(r, world) for r in range(world)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: the optimizer state was saved by {world} ranks; "
                                f"missing {', '.join(missing)}")
    return paths


def _header(path: Path):
    with open(path, "rb") as f:
        k = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(k)), 8 + k


def read_flat(directory: str, world: int, tag: str, lo: int, hi: int, n: int
              ) -> Optional[np.ndarray]:
    """Values ``[lo, hi)`` of the flat state vector ``tag`` from the ``world`` shard files of
    ``directory``, reading only the bytes that overlap; None when the files have no ``tag``
    (masters are saved only for low-precision models)."""
    out = np.zeros(hi - lo, np.float32)
    covered = 0
    for path in _shard_paths(directory, world):
        header, start = _header(path)
        meta = header.get("__metadata__", {})
        if meta.get("format") != SHARD_FORMAT or int(meta.get("n", -1)) != n:
            raise ValueError(f"{path}: optimizer state for {meta.get('n')} values, the model "
                             f"being trained has {n} trainable values")
        flo, fhi = int(meta["lo"]), int(meta["hi"])
        a, b = max(lo, flo), min(hi, fhi)
        if a >= b:
            continue
        if tag not in header:
            return None
        info = header[tag]
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: {tag} is {info['dtype']}, expected F32")
        with open(path, "rb") as f:
            f.seek(start + info["data_offsets"][0] + 4 * (a - flo))
            out[a - lo:b - lo] = np.frombuffer(f.read(4 * (b - a)), np.float32)
        covered += b - a
    if covered != hi - lo:
        raise ValueError(f"{directory}: the optimizer shards cover {covered} of the "
                         f"{hi - lo} values [{lo}, {hi})")
    return out


def load_sharded(opt: ShardedAdamW, directory: str, step: int, shards: int,
                 replicated_file: str = REPLICATED_FILE) -> None:
    """This rank's slices from a checkpoint written by ``shards`` ranks (0: one replicated
    file, ``replicated_file``, whose per-parameter arrays are concatenated and sliced)."""
    if shards:
        slices = {t: read_flat(directory, shards, t, opt.lo, opt.hi, opt.n) for t in TAGS}
    else:
        arrays = W.read_safetensors(str(Path(directory) / replicated_file))
        slices = {}
        for t in TAGS:
            keys = [f"{t}.{p.name}" for p in opt.params]
            if not all(k in arrays for k in keys):
                slices[t] = None
                continue
            flat = np.concatenate([np.asarray(arrays[k], np.float32).reshape(-1) for k in keys])
            slices[t] = flat[opt.lo:opt.hi]
    if slices["exp_avg"] is None or slices["exp_avg_sq"] is None:
        raise ValueError(f"{directory}: no AdamW moments in the optimizer state")
    opt.load_slices(slices, step)


def replicated_arrays(params, directory: str, shards: int) -> Dict[str, np.ndarray]:
    """The per-parameter state arrays (``exp_avg.<name>``, ...) that a replicated AdamW loads,
    assembled from the slices of a sharded checkpoint."""
    sizes = [int(np.prod(p.shape)) if len(p.shape) else 1 for p in params]
    offsets = [0] + np.cumsum(sizes).tolist()
    n = int(offsets[-1])
    out = {}
    for t in TAGS:
        flat = read_flat(directory, shards, t, 0, n, n)
        if flat is None:
            continue
        for p, a, b in zip(params, offsets[:-1], offsets[1:]):
            out[f"{t}.{p.name}"] = flat[a:b].reshape(tuple(p.shape))
    return out
