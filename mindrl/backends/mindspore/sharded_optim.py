"""AdamW with its float32 state sharded over the data-parallel ranks (ZeRO stage 1), and the
checkpoint files of that state.

The replicated :class:`~mindrl.backends.mindspore.optim.AdamW` keeps, on every rank, the flat
float32 moments (8 bytes per parameter) and, for low-precision parameters, float32 masters (4).
Here the flat vector of ``n`` values is cut into ``world`` equal slices of ``s = ceil(n / world)``
(the last one padded with zeros); rank ``r`` owns ``[r s, (r + 1) s)`` and holds the moments and
masters of that slice only. One optimizer step:

1. reduce the accumulated gradient and keep this rank's slice: ``ReduceScatter(SUM)`` on a
   device; on CPU, where MindSpore has no ReduceScatter kernel, ``AllReduce(SUM)`` and slice;
2. global norm: ``AllReduce`` of the slices' squared sums, so clipping and the skip of a
   non-finite step see the whole gradient (a NaN anywhere makes every rank's norm NaN);
3. :func:`~mindrl.backends.mindspore.optim.adamw_math` on the slice: the same element-wise
   arithmetic as the replicated step, so a slice updates exactly as it would inside the full
   vector (only the norm's summation order differs);
4. ``AllGather`` of the new slices, cast to the parameters' dtype first (bf16 on a device: half
   the traffic), written into every rank's full parameters.

Parameters stay replicated (every rank runs the whole forward and backward), and so does the
float32 gradient accumulator the compiled micro-batch steps add into. Per parameter and rank
that is 2 (bf16 weights) + 4 (accumulator) + 12 / world bytes, against 2 + 4 + 12.

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
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, ops

from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.optim import adamw_math, adamw_scalars, flatten
from mindrl.backends.mindspore.weights import write_param

SHARD_FORMAT = "mindrl-mindspore-shard"
_SHARD_RE = re.compile(r"ms_optimizer\.shard(\d+)-of-(\d+)\.safetensors$")
TAGS = ("exp_avg", "exp_avg_sq", "master")


def shard_bounds(n: int, world: int, rank: int):
    """(slice length s, lo, hi) of ``rank``'s slice of an n-vector cut ``world`` ways; the
    slice covers ``[lo, hi)`` of the real values and ``s - (hi - lo)`` padding."""
    s = max(1, -(-n // world))
    lo = min(rank * s, n)
    return s, lo, min(lo + s, n)


def shard_file(rank: int, world: int) -> str:
    return f"ms_optimizer.shard{rank:05d}-of-{world:05d}.safetensors"


class ShardedAdamW:
    """AdamW over ``params`` whose moments and masters hold this rank's slice only.

    The host API is the replicated optimizer's data-parallel path: ``grad_flat`` /
    ``accumulate_in_graph`` / ``flatten`` (the full-size accumulator the compiled steps add
    into), ``grad_norm()`` (reduce + global norm), ``apply(lr, clip, grad_norm)``,
    ``zero_grad()``, ``grad_arrays()`` and ``step``. There is no in-graph update
    (``update_in_graph`` is None): a sharded step always needs collectives between the reduce
    and the update. ``reduce_scatter``: use ``ReduceScatter`` (Ascend / GPU) instead of
    ``AllReduce`` + slice (CPU)."""

    sharded = True

    def __init__(self, params: List[Parameter], *, rank: int, world: int, betas=(0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, reduce_scatter: bool = False,
                 save_masters: bool = False):
        self.params = list(params)
        self.rank, self.world = int(rank), int(world)
        self.b1, self.b2 = float(betas[0]), float(betas[1])
        self.eps, self.wd = float(eps), float(weight_decay)
        self.shapes = [tuple(int(d) for d in p.shape) for p in self.params]
        self.sizes = [int(np.prod(s)) if len(s) else 1 for s in self.shapes]
        self.offsets = [0] + np.cumsum(self.sizes).tolist()
        self.n = n = int(self.offsets[-1])
        self.shard, self.lo, self.hi = shard_bounds(n, self.world, self.rank)
        flat = lambda tag, size: Parameter(Tensor(np.zeros(size, np.float32)),  # noqa: E731
                                           name=f"adamw.{tag}", requires_grad=False)
        self.grad_flat = flat("grad_accum", n)            # this rank's gradients, full length
        self.grad_shard = flat("grad_shard", self.shard)  # the summed gradient, this slice
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
        self._reduce_and_norm = ms.jit(self._reduce_and_norm_fn)
        self._update = ms.jit(self._update_fn)
        self._publish = ms.jit(self._publish_fn)
        self._zero = ms.jit(self._zero_fn)

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

    # --- compiled pieces (closures over plain locals, as in optim.py) --------------------------
    def _build_graph_pieces(self):
        params, shapes, sizes = tuple(self.params), tuple(self.shapes), tuple(self.sizes)
        grad_flat, grad_shard = self.grad_flat, self.grad_shard
        m_flat, v_flat, master = self.m_flat, self.v_flat, self.master
        b1, b2, eps, wd = self.b1, self.b2, self.eps, self.wd
        n, s, world = self.n, self.shard, self.world
        start = self.rank * s                       # in padded coordinates
        pad = s * world - n
        all_reduce, all_gather, reduce_scatter = (self._all_reduce, self._all_gather,
                                                  self._reduce_scatter)
        gather_dtype = self.gather_dtype
        many = len(sizes) > 1

        def padded(x):
            """(n,) -> (s * world,) with zeros after the real values."""
            if pad:
                return ops.concat((x, ops.zeros((pad,), x.dtype)), 0)
            return x

        def accumulate(grads):
            ops.assign_add(grad_flat, flatten(grads))
            return grad_flat

        def reduce_and_norm():
            g = padded(grad_flat.value())
            if reduce_scatter is not None:
                mine = reduce_scatter(g)                             # (s,)
            else:
                mine = all_reduce(g)[start:start + s]
            ops.assign(grad_shard, mine)
            ops.assign(grad_flat, ops.zeros_like(grad_flat))
            sq = all_reduce((mine * mine).sum().reshape((1,)))       # global squared norm
            return ops.sqrt(sq)

        def publish(p_slice):
            """Every rank's new float32 slice -> the full parameters of every rank."""
            full = all_gather(p_slice.astype(gather_dtype))[:n]
            pieces = ops.split(full, list(sizes), 0) if many else (full,)
            i = 0
            for p in params:
                ops.assign(p, pieces[i].reshape(shapes[i]).astype(p.dtype))
                i = i + 1
            return p_slice

        def my_weights():
            """This rank's slice of the float32 weights: the masters, or the parameters."""
            if master is not None:
                return master.value()
            return padded(flatten([p.value() for p in params]))[start:start + s]

        def update(lr, coef, bc1, bc2_sqrt):
            p_new, m_new, v_new = adamw_math(grad_shard.value(), m_flat.value(), v_flat.value(),
                                             my_weights(), lr, coef, bc1, bc2_sqrt,
                                             b1, b2, eps, wd)
            ops.assign(m_flat, m_new)
            ops.assign(v_flat, v_new)
            if master is not None:
                ops.assign(master, p_new)
            publish(p_new)
            return lr

        def zero():
            ops.assign(grad_flat, ops.zeros_like(grad_flat))
            return ops.zeros((), ms.float32)

        self.flatten, self.accumulate_in_graph, self.update_in_graph = flatten, accumulate, None
        self._reduce_and_norm_fn, self._update_fn = reduce_and_norm, update
        self._publish_fn, self._zero_fn, self._my_weights = publish, zero, my_weights

    # --- host API (the replicated optimizer's data-parallel path) ------------------------------
    def grad_norm(self) -> float:
        """Reduce the accumulated gradients (this rank keeps its slice; the accumulator is
        zeroed) and return the global L2 norm."""
        return float(self._reduce_and_norm().asnumpy()[0])

    def apply(self, lr: float, clip: float, grad_norm: float) -> None:
        """One AdamW update of this rank's slice from the reduced gradient, then every rank's
        new weights gathered into the parameters (collective: all ranks call it)."""
        self._update(*adamw_scalars(self.step + 1, self.b1, self.b2, lr, clip, grad_norm))
        self.step += 1

    def zero_grad(self) -> None:
        self._zero()

    def grad_arrays(self) -> List[np.ndarray]:
        """This rank's accumulated (not yet reduced) gradient per parameter, float32 copies."""
        flat = self.grad_flat.asnumpy()
        return [flat[a:b].reshape(s).copy() for a, b, s in
                zip(self.offsets[:-1], self.offsets[1:], self.shapes)]

    def state_nbytes(self) -> Dict[str, int]:
        """Bytes of the optimizer arrays this rank holds, by name."""
        out = {"grad_accum": self.grad_flat.nbytes, "grad_shard": self.grad_shard.nbytes,
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


def load_sharded(opt: ShardedAdamW, directory: str, step: int, shards: int) -> None:
    """This rank's slices from a checkpoint written by ``shards`` ranks (0: one replicated
    file, whose per-parameter arrays are concatenated and sliced)."""
    if shards:
        slices = {t: read_flat(directory, shards, t, opt.lo, opt.hi, opt.n) for t in TAGS}
    else:
        arrays = W.read_safetensors(str(Path(directory) / REPLICATED_FILE))
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
