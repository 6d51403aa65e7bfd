"""``mindrl data sample``: a random or stratified subset of a data file, streamed.

A random subset of the same size as a hand-picked one (``--n 2446``) is the baseline to
compare it with; a stratified subset (``--by level``) keeps each stratum's share of the file.

- random: reservoir sampling (Algorithm R) over the rows, seeded; memory holds ``n`` row
  positions, not the rows.
- stratified: a first pass counts the rows of each value of ``--by`` (a field path such as
  ``level`` or ``extra_info.difficulty``); each stratum gets ``n * count / total`` rows rounded
  by largest remainder (ties to the larger stratum, then the value's name), then a second pass
  draws each stratum's rows by its own reservoir.

The kept rows are written in file order (JSONL, atomically), unchanged. Same file, ``n``,
``seed`` and ``by``: the same rows.
"""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from typing import Any, Dict, List, Optional, Tuple

from mindrl.data.io import DataError, iter_rows, where

MISSING = "(missing)"


def _stratum(row: Any, by: str, path, pos: int) -> str:
    from mindrl.data.fields import FieldMissing, get_field  # noqa: PLC0415

    try:
        v = get_field(row, by)
    except FieldMissing as e:
        raise DataError(f"{where(path, pos)}: --by {by}: {e}") from None
    return MISSING if v is None else str(v)


def allocate(counts: Dict[str, int], n: int) -> Dict[str, int]:
    """Rows per stratum: proportional, rounded by largest remainder (sums to ``n``).

    >>> allocate({"a": 50, "b": 30, "c": 20}, 10)
    {'a': 5, 'b': 3, 'c': 2}
    >>> allocate({"a": 1, "b": 1, "c": 1}, 2)
    {'a': 1, 'b': 1, 'c': 0}
    """
    total = sum(counts.values())
    exact = {k: n * c / total for k, c in counts.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = n - sum(out.values())
    order = sorted(counts, key=lambda k: (-(exact[k] - out[k]), -counts[k], k))
    for k in order[:left]:
        out[k] += 1
    return out


def _reservoir(items, k: int, rng: random.Random) -> List[int]:
    chosen: List[int] = []
    for i, item in enumerate(items):
        if i < k:
            chosen.append(item)
        else:
            j = rng.randint(0, i)
            if j < k:
                chosen[j] = item
    return chosen


def sample_file(src, dst, n: int, seed: int = 0, by: Optional[str] = None
                ) -> Tuple[int, int, "OrderedDict[str, Tuple[int, int]]"]:
    """Write ``n`` rows of ``src`` to ``dst``; returns (rows in the file, rows kept,
    {stratum: (rows in the file, kept)}) (one stratum ``all`` without ``by``)."""
    from mindrl.jsonl import rewrite_jsonl  # noqa: PLC0415

    if n < 1:
        raise DataError(f"--n {n} must be >= 1")
    rng = random.Random(seed)
    if by:
        counts: Counter = Counter()
        for pos, row in iter_rows(src):
            counts[_stratum(row, by, src, pos)] += 1
        total = sum(counts.values())
        if n > total:
            raise DataError(f"{src}: --n {n} is more than its {total} rows")
        quota = allocate(dict(counts), n)
        per: Dict[str, List[int]] = {k: [] for k in counts}
        seen: Counter = Counter()
        rngs = {k: random.Random(f"{seed}-{k}") for k in counts}
        for pos, row in iter_rows(src):             # a reservoir per stratum
            k = _stratum(row, by, src, pos)
            i = seen[k]
            seen[k] += 1
            if i < quota[k]:
                per[k].append(pos)
            else:
                j = rngs[k].randint(0, i)
                if j < quota[k]:
                    per[k][j] = pos
        chosen = {p for ps in per.values() for p in ps}
        strata = OrderedDict((k, (counts[k], quota[k])) for k in sorted(counts, key=str))
    else:
        positions = (pos for pos, _ in iter_rows(src))
        picked = _reservoir(positions, n, rng)
        total = sum(1 for _ in iter_rows(src)) if len(picked) == n else len(picked)
        if len(picked) < n:
            raise DataError(f"{src}: --n {n} is more than its {len(picked)} rows")
        chosen = set(picked)
        strata = OrderedDict([("all", (total, n))])
    rewrite_jsonl(dst, (row for pos, row in iter_rows(src) if pos in chosen))
    return total, len(chosen), strata


def sample_command(args) -> int:
    total, kept, strata = sample_file(args.input, args.output, args.n, args.seed, args.by)
    how = f"stratified by {args.by}" if args.by else "uniformly at random"
    print(f"data sample: {kept} of {total} rows kept ({how}, seed {args.seed}) -> {args.output}")
    if args.by:
        for k, (have, got) in strata.items():
            print(f"  {args.by}={k}: {got} of {have}")
    return 0


def add_sample_parser(sub):
    from mindrl.command import DefaultsHelpFormatter  # noqa: PLC0415

    p = sub.add_parser("sample", help="a random (or --by FIELD stratified) subset of a data file",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=DefaultsHelpFormatter)
    p.add_argument("input", metavar="IN", help="JSONL / JSON / parquet file of rows")
    p.add_argument("-o", "--output", required=True, help="JSONL file to write (atomically)")
    p.add_argument("--n", type=int, required=True, help="rows to keep")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--by", default=None, help="field path to stratify by (e.g. level)")
    p.set_defaults(func=_run)
    return p


def _run(args) -> int:
    try:
        return sample_command(args)
    except DataError as e:
        import sys  # noqa: PLC0415

        print(f"mindrl data sample: error: {e}", file=sys.stderr)
        return 2
