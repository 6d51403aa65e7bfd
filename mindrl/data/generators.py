"""Seeded task generators behind ``data.train_file`` specs such as
``arithmetic:digits=3,ops=+``, ``kk_compact:people=3-4``, ``countdown_compact:numbers=3-4`` and
``tool_mult:digits=3``: their options, their row makers and their held-out validation rows
(:mod:`mindrl.trainer.prompts` streams the training rows from them; ``mindrl eval`` and the
data tools read the held-out rows as a benchmark)."""

from __future__ import annotations

import random
from typing import Dict, List, Tuple

VAL_SEED_OFFSET = 1_000_003


def parse_generator_spec(spec: str) -> Tuple[str, Dict[str, str]]:
    from mindrl.data.io import DataError  # noqa: PLC0415

    name, _, rest = spec.partition(":")
    opts = {}
    for item in filter(None, rest.split(",")):
        if "=" not in item:
            raise DataError(f"generator spec '{spec}': option '{item}' must look like key=value")
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    return name, opts


_ARITH_OPTS = ("digits", "ops", "reverse", "min_digits", "slip", "offset")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def arithmetic_options(opts: Dict[str, str]) -> Dict:
    """Typed keyword arguments of :class:`ArithmeticStream` from a spec's options (a bad option
    raises :class:`mindrl.data.io.DataError` naming it and the valid ones)."""
    from mindrl.data.io import DataError  # noqa: PLC0415

    unknown = sorted(set(opts) - set(_ARITH_OPTS))
    if unknown:
        raise DataError(f"arithmetic generator: unknown option(s) {', '.join(unknown)}; valid: "
                        + ", ".join(_ARITH_OPTS))
    rev = opts.get("reverse", "false").lower()
    if rev not in _TRUE + _FALSE:
        raise DataError(f"arithmetic generator: reverse={opts['reverse']!r} is not a boolean")

    def number(key: str, cast, default):
        try:
            return cast(opts[key]) if key in opts else default
        except ValueError:
            raise DataError(f"arithmetic generator: {key}={opts[key]!r} is not "
                            f"{'an integer' if cast is int else 'a number'}") from None

    out = {"digits": number("digits", int, 3), "ops": opts.get("ops", "+"),
           "reverse": rev in _TRUE, "min_digits": number("min_digits", int, None),
           "slip": number("slip", float, 0.0), "offset": number("offset", int, 0)}
    if not 0.0 <= out["slip"] <= 1.0:
        raise DataError(f"arithmetic generator: slip={opts['slip']} must be in [0, 1]")
    if out["offset"] < 0:
        raise DataError(f"arithmetic generator: offset={opts['offset']} must be >= 0")
    if out["digits"] < 1 or (out["min_digits"] is not None
                             and not 1 <= out["min_digits"] <= out["digits"]):
        raise DataError(f"arithmetic generator: need 1 <= min_digits <= digits (got {opts})")
    return out


def _count_range(name: str, key: str, text: str, lo: int, hi: int) -> Tuple[int, ...]:
    """``3`` -> (3,), ``3-4`` -> (3, 4), within ``lo..hi``."""
    from mindrl.data.io import DataError  # noqa: PLC0415

    try:
        a, _, b = text.partition("-")
        first, last = int(a), int(b or a)
    except ValueError:
        raise DataError(f"{name} generator: {key}={text!r} is not a count or a range like "
                        f"3-4") from None
    if not lo <= first <= last <= hi:
        raise DataError(f"{name} generator: {key}={text} must lie within {lo}..{hi}")
    return tuple(range(first, last + 1))


def _task_options(name: str, opts: Dict[str, str], counts: Tuple[str, int, int, str],
                  ints: Dict[str, int]) -> Dict:
    """Typed options of the ``kk`` / ``countdown`` generators (see the module docstring)."""
    from mindrl.data.io import DataError  # noqa: PLC0415

    key, lo, hi, default = counts
    valid = (key, "slip", "offset") + tuple(ints)
    unknown = sorted(set(opts) - set(valid))
    if unknown:
        raise DataError(f"{name} generator: unknown option(s) {', '.join(unknown)}; valid: "
                        + ", ".join(valid))
    out = {key: _count_range(name, key, opts.get(key, default), lo, hi)}
    for k, dflt in list(ints.items()) + [("offset", 0)]:
        try:
            out[k] = int(opts.get(k, dflt))
        except ValueError:
            raise DataError(f"{name} generator: {k}={opts[k]!r} is not an integer") from None
        if out[k] < (0 if k == "offset" else 1):
            raise DataError(f"{name} generator: {k}={opts[k]} is out of range")
    try:
        out["slip"] = float(opts.get("slip", 0.0))
    except ValueError:
        raise DataError(f"{name} generator: slip={opts['slip']!r} is not a number") from None
    if not 0.0 <= out["slip"] <= 1.0:
        raise DataError(f"{name} generator: slip={opts['slip']} must be in [0, 1]")
    return out


def kk_options(opts: Dict[str, str]) -> Dict:
    return _task_options("kk_compact", opts, ("people", 2, 8, "3"), {})


def countdown_options(opts: Dict[str, str]) -> Dict:
    return _task_options("countdown_compact", opts, ("numbers", 2, 5, "3"),
                         {"max_number": 9, "max_target": 99})


def tool_mult_options(opts: Dict[str, str]) -> Dict:
    """Typed options of the ``tool_mult`` generator (see the module docstring)."""
    from mindrl.data.io import DataError  # noqa: PLC0415

    valid = ("digits", "call", "offset")
    unknown = sorted(set(opts) - set(valid))
    if unknown:
        raise DataError(f"tool_mult generator: unknown option(s) {', '.join(unknown)}; valid: "
                        + ", ".join(valid))
    out = {}
    for key, cast, default, lo, hi in (("digits", int, 3, 1, 6), ("offset", int, 0, 0, None),
                                       ("call", float, 0.3, 0.0, 1.0)):
        try:
            out[key] = cast(opts.get(key, default))
        except ValueError:
            raise DataError(f"tool_mult generator: {key}={opts[key]!r} is not "
                            f"{'an integer' if cast is int else 'a number'}") from None
        if out[key] < lo or (hi is not None and out[key] > hi):
            raise DataError(f"tool_mult generator: {key}={opts[key]} must lie within "
                            f"{lo}..{hi if hi is not None else 'any'}")
    return out


def _make_tool_mult(rng: random.Random, **options) -> Dict:
    from rewards.tool_demo import make_tool_mult

    return make_tool_mult(rng, **options)


def _make_arithmetic(rng: random.Random, digits: int = 3, ops: str = "+", **options) -> Dict:
    from rewards.arithmetic import make_problem

    return make_problem(rng, digits, ops, **options)


def _make_kk(rng: random.Random, **options) -> Dict:
    from rewards.demo_tasks import make_kk

    return make_kk(rng, **options)


def _make_countdown(rng: random.Random, **options) -> Dict:
    from rewards.demo_tasks import make_countdown_row

    return make_countdown_row(rng, **options)


# generator name -> (typed options from a spec, row maker: (random.Random, **options) -> row)
GENERATORS = {"arithmetic": (arithmetic_options, _make_arithmetic),
              "kk_compact": (kk_options, _make_kk),
              "countdown_compact": (countdown_options, _make_countdown),
              "tool_mult": (tool_mult_options, _make_tool_mult)}


def arithmetic_val_rows(opts: Dict[str, str], n: int, seed: int) -> List[Dict]:
    from rewards.arithmetic import generate

    options = arithmetic_options(opts)
    offset = options.pop("offset")    # skip the first ``offset`` rows of the validation stream
    return generate(offset + n, seed + VAL_SEED_OFFSET, **options)[offset:]


def generator_val_rows(name: str, opts: Dict[str, str], n: int, seed: int) -> List[Dict]:
    """``n`` distinct held-out rows of a generator (after skipping ``offset`` of them), drawn
    from one RNG seeded ``seed + VAL_SEED_OFFSET``."""
    if name == "arithmetic":
        return arithmetic_val_rows(opts, n, seed)
    from mindrl.data.io import DataError  # noqa: PLC0415

    options = GENERATORS[name][0](opts)
    offset = options.pop("offset")
    rng = random.Random(seed + VAL_SEED_OFFSET)
    rows, seen, budget = [], set(), 50 * (offset + n) + 1000
    while len(rows) < offset + n and budget:
        budget -= 1
        row = GENERATORS[name][1](rng, **options)
        if row["problem"] not in seen:
            seen.add(row["problem"])
            rows.append(row)
    if len(rows) < offset + n:
        raise DataError(f"{name} generator: only {len(rows)} distinct problems found "
                        f"(asked for {offset + n})")
    return rows[offset:]
