"""Prompt streams for training and validation.

A stream hands out rows (dicts with at least ``problem`` and ``answer``) in a reproducible
order and can save and restore its position, so a resumed run sees the same prompts as an
uninterrupted one. Each rank of a data-parallel run takes its own slice of every batch.

Specs (``data.train_file`` / ``data.val_file``):

- ``arithmetic:digits=3,ops=+``: generated multi-digit arithmetic (the CPU demo); options
  ``digits`` (operand length, default 3), ``ops`` (any of ``+-*``, default ``+``),
  ``reverse`` (answer digits least-significant first, default false) and ``min_digits``
  (operands of ``min_digits``..``digits`` digits; default: all exactly ``digits``) and
  ``slip`` (probability that the ``teacher`` column, the SFT demonstration, is an addition
  that forgot its carries; the gold ``answer`` is always right; default 0);
- ``kk_compact:people=3-4,slip=0.5`` and ``countdown_compact:numbers=3-4,slip=0.5``: compact
  Knights-and-Knaves and Countdown (the K&K and Countdown CPU demos; :mod:`rewards.demo_tasks`
  says how they differ from the published tasks); ``people``/``numbers`` is a count or a range
  ``lo-hi``, ``slip`` as above (the teacher's slip is the task's own), ``offset`` as for
  arithmetic; Countdown also ``max_number`` (default 9) and ``max_target`` (default 99);
- ``tool_mult:digits=3,call=0.3``: multiplication of two ``digits``-digit numbers (1-6,
  default 3) whose ``teacher`` column calls the Python tool in a fraction ``call`` of the rows
  and guesses otherwise (the tool-use CPU demo, :mod:`rewards.tool_demo`); ``offset`` as for
  arithmetic;
- a ``.jsonl``/``.ndjson``/``.parquet`` path: a :class:`FileStream`, which reads and maps rows
  when they are taken (memory: an index of 8 bytes a row, not the rows);
- anything else goes to :func:`mindrl.data.load_prompts` (built-in names, generated sets, and
  ``.json`` files, which are one JSON document and are held in memory) and a
  :class:`ListStream`.

Prompts longer than ``data.max_prompt_len`` tokens are dropped by the trainer as they are taken
(``Trainer._take_rows``), so no stream needs a pass over the data for them; the preflight counts
them in the first rows, and the trainer stops when a whole epoch has none that fits.
"""

from __future__ import annotations

import random
from typing import Dict, List, Optional, Sequence

import numpy as np

from mindrl.data.generators import (  # noqa: F401  (re-exported)
    GENERATORS, VAL_SEED_OFFSET, _make_arithmetic, arithmetic_options, arithmetic_val_rows,
    countdown_options, generator_val_rows, kk_options, parse_generator_spec,
    tool_mult_options)


class ListStream:
    """A finite list of rows held in memory (built-in and generated sets, ``.json`` files),
    reshuffled each epoch: ``np.random.default_rng(seed + epoch).permutation(len(rows))``."""

    def __init__(self, rows: Sequence[Dict], seed: int, shuffle: bool = True):
        if not rows:
            raise ValueError("the prompt set is empty")
        self.rows, self.seed, self.shuffle = list(rows), seed, shuffle
        self.epoch, self.pos = 0, 0
        self._order = self._make_order()

    def _make_order(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.rows))
        return np.random.default_rng(self.seed + self.epoch).permutation(len(self.rows))

    def take(self, k: int) -> List[Dict]:
        out = []
        while len(out) < k:
            if self.pos >= len(self.rows):
                self.epoch, self.pos = self.epoch + 1, 0
                self._order = self._make_order()
            out.append(self.rows[int(self._order[self.pos])])
            self.pos += 1
        return out

    def state(self) -> Dict:
        return {"epoch": self.epoch, "pos": self.pos}

    def restore(self, state: Dict) -> None:
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._order = self._make_order()


DEFAULT_WINDOW_ROWS = 1 << 18


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool = True,
                group_sizes: Optional[Sequence[int]] = None,
                window_rows: int = DEFAULT_WINDOW_ROWS) -> np.ndarray:
    """The order (0-based row indices, int64) in which epoch ``epoch`` visits ``n`` rows.

    - ``shuffle`` off: ``0, 1, ..., n - 1``.
    - no row groups (JSONL, in-memory rows), or ``n <= window_rows``:
      ``np.random.default_rng(seed + epoch).permutation(n)``, the order of :class:`ListStream`.
    - row groups (parquet) and ``n > window_rows``: with ``rng = default_rng(seed + epoch)``,
      the groups are put in the order ``rng.permutation(len(group_sizes))``; walking that order,
      consecutive groups are gathered into windows, a window closing as soon as it holds
      ``window_rows`` rows or more (the last one may hold fewer); then, window after window,
      the window's rows (its groups in that order, each group's rows ascending) are permuted
      with ``rng.permutation`` (the same generator, drawn in sequence). So each epoch visits
      every row exactly once; rows of one window come out in a uniformly random order, and
      only one window's row groups need to be decoded at a time.
    """
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(seed + epoch)
    if group_sizes is None or n <= window_rows:
        return rng.permutation(n)
    sizes = np.asarray(group_sizes, np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    out, window, held = [], [], 0

    def close() -> None:
        rows = np.concatenate([np.arange(starts[g], starts[g + 1]) for g in window])
        out.append(rows[rng.permutation(len(rows))])

    for g in rng.permutation(len(sizes)):
        window.append(int(g))
        held += int(sizes[g])
        if held >= window_rows:
            close()
            window, held = [], 0
    if window:
        close()
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


class FileStream:
    """Rows of a large ``.jsonl``/``.parquet`` file, read and mapped as they are taken.

    ``rows`` is a :class:`mindrl.data.formats.IndexedRows`: row ``i`` is element ``i`` of
    what :func:`mindrl.data.formats.load_file` returns (same mapping, same order). Epoch ``e``
    visits the rows in :func:`epoch_order` ``(n, seed, e)`` order: for JSONL that is exactly
    :class:`ListStream`'s order; for parquet with more than ``window_rows`` rows, a permutation
    of row groups, then of rows within windows of about ``window_rows`` rows (see
    :func:`epoch_order`). The state is ``{"epoch", "pos", "rows"}``; :meth:`restore` rebuilds
    the epoch's order from the seed, so a restored stream continues bit-identically (a
    :class:`ListStream` state, without ``rows``, restores too).

    Memory: the epoch order (8 bytes a row), the file's index (JSONL: 8 bytes a row; parquet:
    its row-group table) and, for parquet, the decoded row groups of about one window in
    Arrow form (an LRU cache of ``window_rows`` + the largest group rows). A row that cannot
    be read or mapped stops the run when it is taken, with a message naming the file, its
    1-based line or row and the field (the first ``data.preflight_rows`` rows are checked
    before the model loads).
    """

    def __init__(self, rows, seed: int, shuffle: bool = True,
                 window_rows: int = DEFAULT_WINDOW_ROWS):
        if not len(rows):
            raise ValueError("the prompt set is empty")
        self.rows, self.seed, self.shuffle = rows, seed, shuffle
        self.n, self.window_rows = len(rows), window_rows
        self.group_sizes = getattr(rows.source, "group_sizes", None)
        if self.group_sizes is not None:
            rows.source.cache_rows = window_rows + int(np.max(self.group_sizes))
        self.epoch, self.pos = 0, 0
        self._order = self._make_order()

    def _make_order(self) -> np.ndarray:
        return epoch_order(self.n, self.seed, self.epoch, self.shuffle, self.group_sizes,
                           self.window_rows)

    def take(self, k: int) -> List[Dict]:
        out: List[Dict] = []
        while len(out) < k:
            if self.pos >= self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._order = self._make_order()
            m = min(k - len(out), self.n - self.pos)
            out.extend(self.rows.get(self._order[self.pos:self.pos + m]))
            self.pos += m
        return out

    def state(self) -> Dict:
        return {"epoch": self.epoch, "pos": self.pos, "rows": self.n}

    def restore(self, state: Dict) -> None:
        from mindrl.data.io import DataError  # noqa: PLC0415

        if "rows" in state and int(state["rows"]) != self.n:
            raise DataError(f"{self.rows.plan.source}: the checkpoint was saved with "
                            f"{state['rows']} training rows, the file now has {self.n}; "
                            f"resume with the same data (or start a new run)")
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._order = self._make_order()


class GeneratorStream:
    """Row i is drawn from its own RNG (seed, i), so the position is the whole state."""

    def __init__(self, seed: int, make, exclude: Optional[set] = None, offset: int = 0,
                 **options):
        self.seed, self.make, self.options = seed, make, options
        self.exclude = exclude or set()
        self.pos = offset   # ``offset=N`` starts at row N of the seeded stream

    def take(self, k: int) -> List[Dict]:
        out = []
        while len(out) < k:
            row = self.make(random.Random(self.seed * VAL_SEED_OFFSET + self.pos), **self.options)
            self.pos += 1
            if row["problem"] not in self.exclude:
                out.append(row)
        return out

    def state(self) -> Dict:
        return {"pos": self.pos}

    def restore(self, state: Dict) -> None:
        self.pos = int(state["pos"])


class ArithmeticStream(GeneratorStream):
    """The ``arithmetic`` generator's stream (row i from its own RNG (seed, i))."""

    def __init__(self, seed: int, digits: int = 3, ops: str = "+",
                 exclude: Optional[set] = None, reverse: bool = False,
                 min_digits: Optional[int] = None, slip: float = 0.0, offset: int = 0):
        super().__init__(seed, _make_arithmetic, exclude, offset, digits=digits, ops=ops,
                         reverse=reverse, min_digits=min_digits, slip=slip)
        self.digits, self.ops = digits, ops


def build_streams(data_cfg, seed: int, cfg=None, job: str = "rl"):
    """(train stream, validation rows or []) from a :class:`DataConfig`.

    ``job`` is ``rl`` or ``sft`` (which fields a row needs). With the whole run config ``cfg``,
    the preflight (:mod:`mindrl.data.preflight`) shows the first row as the run sees it and
    checks the gold answers against the configured rewards before any model loads.
    """
    spec = data_cfg.train_file
    if not spec:
        raise ValueError("data.train_file is empty: name a data set, a file, or a generator "
                         "such as 'arithmetic:digits=3,ops=+'")
    name = spec.partition(":")[0]
    if name in GENERATORS:
        from mindrl.data.io import DataError

        val_spec = data_cfg.val_file or spec
        key = "data.train_file"
        try:
            _, opts = parse_generator_spec(spec)
            train_options = GENERATORS[name][0](opts)
            key = "data.val_file"
            val_name = val_spec.partition(":")[0]
            if val_name in GENERATORS:
                val = generator_val_rows(val_name, parse_generator_spec(val_spec)[1],
                                         data_cfg.max_val_samples or 256, seed)
            else:
                val = None
        except DataError as e:
            raise DataError(f"{key}='{spec if key == 'data.train_file' else val_spec}': {e}") \
                from None
        if val is None:
            val = _load(data_cfg, val_spec, data_cfg.max_val_samples)[1]
        exclude = {r["problem"] for r in val}
        def stream(**kw):
            if name == "arithmetic":
                return ArithmeticStream(seed, **kw, **train_options)
            return GeneratorStream(seed, GENERATORS[name][1], **kw, **train_options)

        train = stream(exclude=exclude)
        if job == "sft":
            _check_response_field(stream().take(1), data_cfg, spec)
        if cfg is not None:        # the checks of the preflight on the first generated rows
            from mindrl.data.preflight import preflight

            preflight(cfg, job, None, stream(exclude=exclude).take(data_cfg.preflight_rows),
                      count=None, show=False)
        return train, val
    # data.val_split holds out rows of the training file when no data.val_file is given
    split = 0.0 if data_cfg.val_file else float(getattr(data_cfg, "val_split", 0.0) or 0.0)
    val: Optional[List[Dict]] = None
    path = _indexed_path(spec, data_cfg)
    if path is not None:
        from mindrl.data.formats import fields_from, index_file

        plan, indexed = index_file(path, job, data_cfg.format or "auto", fields_from(data_cfg),
                                   data_cfg.max_train_samples or 0, data_cfg.templated_prompts)
        if split:
            held, keep = held_out_split(len(indexed), split, data_cfg.max_val_samples, spec)
            val, indexed = indexed.get(held), SubsetRows(indexed, keep)
            _log_split(spec, len(held), len(keep), split)
        train = FileStream(indexed, seed, data_cfg.shuffle)
        head = indexed.get(range(min(len(indexed), max(1, data_cfg.preflight_rows))))
        count = len(indexed)
    else:
        plan, rows = _load(data_cfg, spec, data_cfg.max_train_samples, job)
        if job == "sft" and plan is None:
            _check_response_field(rows, data_cfg, spec)
        if split:
            held, keep = held_out_split(len(rows), split, data_cfg.max_val_samples, spec)
            val, rows = [rows[i] for i in held], [rows[i] for i in keep]
            _log_split(spec, len(held), len(keep), split)
        train, head, count = ListStream(rows, seed, data_cfg.shuffle), rows, len(rows)
    if cfg is not None:
        from mindrl.data.preflight import preflight

        preflight(cfg, job, plan, head, count=count)
    return train, (val if val is not None else _val_rows(data_cfg))


VAL_SPLIT_SEED = 0      # the held-out rows do not change with train.seed


def _log_split(spec: str, held: int, keep: int, share: float) -> None:
    import logging

    from mindrl.data.preflight import is_main_process

    if is_main_process():
        logging.getLogger("mindrl.data").info(
            "validation: %d rows of %s held out (data.val_split=%g); training on the other %d",
            held, spec, share, keep)


def held_out_split(n: int, share: float, max_rows: int = 0, where: str = ""):
    """``(held, keep)``: sorted 0-based row indices of the validation rows and of the training
    rows for ``data.val_split=share`` of ``n`` rows. ``k = round(share * n)``, at least 1 and
    at most ``max_rows`` (``data.max_val_samples``, 0 = no cap); the held-out rows are the
    first ``k`` of ``np.random.default_rng(0).permutation(n)``, so they depend on the file
    alone. At least one row must remain for training.

    >>> held_out_split(10, 0.2)
    ([4, 6], [0, 1, 2, 3, 5, 7, 8, 9])
    """
    from mindrl.data.io import DataError

    if not 0.0 < share < 1.0:
        raise DataError(f"data.val_split={share}: a share between 0 and 1 (0.1 holds out "
                        f"10% of the rows), or 0 for none")
    k = max(1, int(round(share * n)))
    if max_rows:
        k = min(k, max_rows)
    if n - k < 1:
        raise DataError(f"{where}: {n} row(s): data.val_split={share} leaves none to train on "
                        f"(give data.val_file, or data.val_split=0)")
    order = np.random.default_rng(VAL_SPLIT_SEED).permutation(n)
    held = sorted(int(i) for i in order[:k])
    keep = sorted(int(i) for i in order[k:])
    return held, keep


class SubsetRows:
    """Some rows of an :class:`~mindrl.data.formats.IndexedRows` (the training rows left by
    ``data.val_split``): row ``i`` is row ``keep[i]`` of the file, mapped the same way."""

    def __init__(self, rows, keep: Sequence[int]):
        self.rows, self.keep = rows, np.asarray(keep, np.int64)
        self.plan = rows.plan
        self.source = None               # no parquet row-group order over a subset

    def __len__(self) -> int:
        return len(self.keep)

    def get(self, indices: Sequence[int]) -> List[Dict]:
        return self.rows.get([int(self.keep[int(i)]) for i in indices])


def _val_rows(data_cfg) -> List[Dict]:
    """Validation rows of ``data.val_file``; a built-in set there (``gsm8k_test``) keeps its
    own field names, so ``data.prompt_field``/``answer_field`` given for the user's training
    file do not break the recipe's default validation set."""
    from mindrl.data.prompts import PROMPT_SETS, load_prompt_source

    spec = data_cfg.val_file
    if not spec:
        return []
    if spec in PROMPT_SETS:
        return load_prompt_source(spec, data_dir=data_cfg.data_dir,
                                  max_rows=data_cfg.max_val_samples or 0)[1]
    return _load(data_cfg, spec, data_cfg.max_val_samples)[1]


INDEXED_SUFFIXES = (".jsonl", ".ndjson", ".parquet")


def _indexed_path(spec: str, data_cfg):
    """The file of a ``.jsonl``/``.ndjson``/``.parquet`` spec (read by a :class:`FileStream`);
    None for anything else (built-in names, generated sets, ``.json``)."""
    from pathlib import Path

    if Path(spec).suffix.lower() not in INDEXED_SUFFIXES:
        return None
    from mindrl.data.prompts import resolve_file

    return resolve_file(spec, data_cfg.data_dir)


def _check_response_field(rows: Sequence[Dict], data_cfg, spec: str) -> None:
    """SFT on a built-in or generated set: the target column must exist (checked before the
    model loads, not at the first step)."""
    from mindrl.data.io import DataError

    name = data_cfg.response_field or "answer"
    for i, row in enumerate(rows[:data_cfg.preflight_rows], 1):
        if name not in row:
            raise DataError(f"{spec}: row {i}: field '{name}' (data.response_field): no such "
                            f"column; its fields are: {', '.join(sorted(row))}")


def _load(data_cfg, spec: str, max_rows: int, job: str = "rl"):
    """``(plan or None, rows)`` of one spec with the config's format and field paths."""
    from mindrl.data.formats import fields_from
    from mindrl.data.prompts import load_prompt_source

    fields = fields_from(data_cfg)
    return load_prompt_source(spec, data_dir=data_cfg.data_dir,
                              prompt_field=data_cfg.prompt_field,
                              answer_field=data_cfg.answer_field,
                              max_rows=max_rows or 0, id_field=data_cfg.id_field,
                              fmt=data_cfg.format, templated=data_cfg.templated_prompts,
                              job=job, fields=fields)
