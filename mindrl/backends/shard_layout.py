"""Where each value of a flat parameter vector lives when its optimizer state is sharded over
data-parallel ranks in buckets, and what the bucket-wise gather of new weights holds at once.
Plain Python (no framework): the MindSpore backend's ``ShardedAdamW`` builds its collectives
from it, and the memory plan counts the gather's working set with the same schedule.

The flat vector of ``n`` values (all trainable parameters, in order) is cut into ``world``
slices of ``s = ceil(n / world)`` values (the last padded); rank ``r`` owns ``[r s, (r + 1) s)``.
Each slice is cut into chunks of ``c = bucket_bytes / 4 / world`` values; chunk k of every
rank's slice, in rank order, is bucket k: one ReduceScatter of float32 gradients (at most
``bucket_bytes``) and one AllGather of new weights. A parameter is written once the last
bucket that carries a piece of it has been gathered; until then its pieces wait.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

# float32 bytes of gradient one reduce moves (a bucket: one chunk of every rank's slice)
BUCKET_BYTES = 256 * 2 ** 20


def shard_bounds(n: int, world: int, rank: int):
    """(slice length s, lo, hi) of ``rank``'s slice of an n-vector cut ``world`` ways; the
    slice covers ``[lo, hi)`` of the real values and ``s - (hi - lo)`` padding."""
    s = max(1, -(-n // world))
    lo = min(rank * s, n)
    return s, lo, min(lo + s, n)


def bucket_chunks(shard: int, world: int, bucket_bytes: int) -> List[Tuple[int, int]]:
    """[a, b) ranges cutting a slice of ``shard`` values into chunks of at most
    ``bucket_bytes / 4 / world`` values (chunk k of every rank's slice make bucket k)."""
    c = max(1, min(shard, int(bucket_bytes) // 4 // max(1, world)))
    return [(a, min(a + c, shard)) for a in range(0, shard, c)]


def pieces(offsets: Sequence[int], lo: int, hi: int) -> Tuple[Tuple[int, int, int], ...]:
    """Values ``[lo, hi)`` of the padded flat vector whose parameter ``i`` covers
    ``[offsets[i], offsets[i + 1])``, as (i, start, end) inside that parameter, then
    (-1, 0, length) for padding past the last parameter."""
    out, at = [], lo
    for i in range(len(offsets) - 1):
        x, y = max(offsets[i], lo), min(offsets[i + 1], hi)
        if x < y:
            out.append((i, x - offsets[i], y - offsets[i]))
            at = y
    if at < hi:
        out.append((-1, 0, hi - max(at, lo)))
    return tuple(out)


def gather_schedule(sizes: Sequence[int], world: int, bucket_bytes: int):
    """(offsets, s, chunks, complete_after): ``complete_after[k]`` lists the parameters whose
    last piece arrives with bucket k, as (i, ((bucket, start, end), ...)) -- the pieces of
    parameter i in order, each a range of that bucket's gathered vector (``world`` chunks of
    its length, in rank order)."""
    offsets = [0]
    for n_i in sizes:
        offsets.append(offsets[-1] + int(n_i))
    n = offsets[-1]
    s = shard_bounds(n, world, 0)[0]
    chunks = bucket_chunks(s, world, bucket_bytes)
    per_param: List[list] = [[] for _ in sizes]
    for k, (a, b) in enumerate(chunks):
        for r in range(world):
            g0 = r * s + a                       # the chunk's global start; in bucket k at r c
            for i, x, y in pieces(offsets, g0, r * s + b):
                if i >= 0:
                    u = r * (b - a) + offsets[i] + x - g0
                    per_param[i].append((offsets[i] + x, k, u, u + y - x))
    complete_after: List[list] = [[] for _ in chunks]
    for i, ps in enumerate(per_param):
        ps.sort()
        complete_after[max(k for _, k, _, _ in ps)].append(
            (i, tuple((k, u, w) for _, k, u, w in ps)))
    return offsets, s, chunks, tuple(tuple(c) for c in complete_after)


def gather_peak_values(sizes: Sequence[int], world: int, bucket_bytes: int) -> int:
    """The most values the bucket-wise gather holds at once on a rank: at bucket k, the bucket
    just gathered, every piece cut from buckets up to k for a parameter not yet written before
    k, and the largest parameter written at k (its pieces concatenated)."""
    _, _, chunks, complete_after = gather_schedule(sizes, world, bucket_bytes)
    held = [0] * (len(chunks) + 1)                # difference array over buckets
    for k_done, params in enumerate(complete_after):
        for _, ps in params:
            for k, u, w in ps:                    # cut at bucket k, freed after k_done
                held[k] += w - u
                held[k_done + 1] -= w - u
    peak, now = 0, 0
    for k, (a, b) in enumerate(chunks):
        now += held[k]
        written = max((sizes[i] for i, _ in complete_after[k]), default=0)
        peak = max(peak, (b - a) * world + now + written)
    return peak
