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
- anything else goes to :func:`mindrl.data.load_prompts` (built-in names, JSONL/parquet paths).
"""

from __future__ import annotations

import random
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

VAL_SEED_OFFSET = 1_000_003


def parse_generator_spec(spec: str) -> Tuple[str, Dict[str, str]]:
    name, _, rest = spec.partition(":")
    opts = {}
    for item in filter(None, rest.split(",")):
        if "=" not in item:
            raise ValueError(f"generator spec '{spec}': option '{item}' must look like key=value")
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    return name, opts


_ARITH_OPTS = ("digits", "ops", "reverse", "min_digits", "slip")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def arithmetic_options(opts: Dict[str, str]) -> Dict:
    """Typed keyword arguments of :func:`rewards.arithmetic.make_problem` from a spec's options."""
    unknown = sorted(set(opts) - set(_ARITH_OPTS))
    if unknown:
        raise ValueError(f"arithmetic generator: unknown option(s) {', '.join(unknown)}; valid: "
                         + ", ".join(_ARITH_OPTS))
    rev = opts.get("reverse", "false").lower()
    if rev not in _TRUE + _FALSE:
        raise ValueError(f"arithmetic generator: reverse={opts['reverse']!r} is not a boolean")
    out = {"digits": int(opts.get("digits", 3)), "ops": opts.get("ops", "+"),
           "reverse": rev in _TRUE,
           "min_digits": int(opts["min_digits"]) if "min_digits" in opts else None,
           "slip": float(opts.get("slip", 0.0))}
    if not 0.0 <= out["slip"] <= 1.0:
        raise ValueError(f"arithmetic generator: slip={opts['slip']} must be in [0, 1]")
    if out["digits"] < 1 or (out["min_digits"] is not None
                             and not 1 <= out["min_digits"] <= out["digits"]):
        raise ValueError(f"arithmetic generator: need 1 <= min_digits <= digits (got {opts})")
    return out


class ListStream:
    """A finite list of rows, reshuffled each epoch with ``seed + epoch``."""

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


class ArithmeticStream:
    """Row i is drawn from its own RNG (seed, i), so the position is the whole state."""

    def __init__(self, seed: int, digits: int = 3, ops: str = "+",
                 exclude: Optional[set] = None, reverse: bool = False,
                 min_digits: Optional[int] = None, slip: float = 0.0):
        self.seed, self.digits, self.ops = seed, digits, ops
        self.options = {"reverse": reverse, "min_digits": min_digits, "slip": slip}
        self.exclude = exclude or set()
        self.pos = 0

    def take(self, k: int) -> List[Dict]:
        from rewards.arithmetic import make_problem

        out = []
        while len(out) < k:
            row = make_problem(random.Random(self.seed * VAL_SEED_OFFSET + self.pos), self.digits,
                               self.ops, **self.options)
            self.pos += 1
            if row["problem"] not in self.exclude:
                out.append(row)
        return out

    def state(self) -> Dict:
        return {"pos": self.pos}

    def restore(self, state: Dict) -> None:
        self.pos = int(state["pos"])


def arithmetic_val_rows(opts: Dict[str, str], n: int, seed: int) -> List[Dict]:
    from rewards.arithmetic import generate

    return generate(n, seed + VAL_SEED_OFFSET, **arithmetic_options(opts))


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
    if spec.partition(":")[0] == "arithmetic":
        _, opts = parse_generator_spec(spec)
        val_spec = data_cfg.val_file or spec
        if val_spec.partition(":")[0] == "arithmetic":
            val = arithmetic_val_rows(parse_generator_spec(val_spec)[1],
                                      data_cfg.max_val_samples or 256, seed)
        else:
            val = _load(data_cfg, val_spec, data_cfg.max_val_samples)[1]
        exclude = {r["problem"] for r in val}
        train = ArithmeticStream(seed, exclude=exclude, **arithmetic_options(opts))
        if job == "sft":
            probe = ArithmeticStream(seed, **arithmetic_options(opts)).take(1)
            _check_response_field(probe, data_cfg, spec)
        return train, val
    plan, rows = _load(data_cfg, spec, data_cfg.max_train_samples, job)
    if job == "sft" and plan is None:
        _check_response_field(rows, data_cfg, spec)
    if cfg is not None:
        from mindrl.data.preflight import preflight

        preflight(cfg, job, plan, rows)
    val = _load(data_cfg, data_cfg.val_file, data_cfg.max_val_samples)[1] \
        if data_cfg.val_file else []
    return ListStream(rows, seed, data_cfg.shuffle), val


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
