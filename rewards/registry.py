"""The reward registry and the lookup used by configs.

A reward is ``fn(completions: list[str], **columns) -> list[float | None]``: ``columns`` are lists
aligned with ``completions`` (``answer=[...]``, ``completion_lengths=[...]``, ...); None means "not
scorable" and is counted by the scorer, never silently turned into a score. Rewards that take
parameters are registered as classes whose instances are picklable callables, so that the
scoring pool can send them to worker processes.

A reward that needs the whole batch at once (Kimi 1.5's length reward compares lengths across
the batch) declares ``batch_level = True``; the pool then runs it on the whole list in one call.

YAML chooses rewards by registered name or by dotted import path::

    reward:
      functions:
        - {name: accuracy, weight: 1.0}
        - {name: cosine, weight: 1.0, params: {max_len: 1000}}
        - {name: my_pkg.my_rewards:brevity, weight: 0.1}
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any, Callable, Mapping, Optional

from mindrl.registry import Registry, RegistryError

REWARDS: Registry = Registry("reward")

# Modules whose import registers the built-in rewards.
_BUILTIN_MODULES = ("rewards.open_r1", "rewards.knights_knaves", "rewards.countdown",
                    "rewards.gsm8k", "rewards.arithmetic", "rewards.demo_tasks",
                    "rewards.tool_demo", "rewards.tool_calls", "rewards.judge",
                    "rewards.reward_model")


def load_builtin_rewards() -> None:
    """Import the modules that register the built-in rewards (idempotent)."""
    for mod in _BUILTIN_MODULES:
        importlib.import_module(mod)


def batch_level(fn):
    """Mark a reward as batch-level: the scorer calls it once on the whole batch."""
    fn.batch_level = True
    return fn


def is_batch_level(fn: Any) -> bool:
    """True when ``fn`` (a function, class instance or ``functools.partial``) is batch-level."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return bool(getattr(fn, "batch_level", False))


def _import_path(path: str) -> Any:
    if ":" in path:
        mod_name, attr = path.split(":", 1)
    else:
        mod_name, _, attr = path.rpartition(".")
    if not mod_name or not attr:
        raise RegistryError(f"'{path}' is neither a registered reward nor an import path")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as e:
        raise RegistryError(f"cannot import reward module '{mod_name}' for '{path}': {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RegistryError(f"module '{mod_name}' has no attribute '{attr}'") from None
    return obj


def resolve_reward(name_or_path: str, params: Optional[Mapping[str, Any]] = None) -> Callable:
    """The reward callable for a config entry.

    ``name_or_path`` is a registered name (``accuracy``) or an import path (``pkg.mod:fn`` or
    ``pkg.mod.fn``). A class is instantiated with ``params``; a function with non-empty
    ``params`` is bound with :func:`functools.partial` (picklable when the function is defined
    at module level). A miss raises :class:`RegistryError` listing the registered names.
    """
    load_builtin_rewards()
    params = dict(params or {})
    if name_or_path in REWARDS:
        obj = REWARDS.get(name_or_path)
    elif "." in name_or_path or ":" in name_or_path:
        obj = _import_path(name_or_path)
    else:
        obj = REWARDS.get(name_or_path)  # raises, listing the valid names
    if inspect.isclass(obj):
        return obj(**params)
    if not callable(obj):
        raise RegistryError(f"reward '{name_or_path}' is not callable: {obj!r}")
    if params:
        # params must name keyword parameters: **columns is for per-row data, not settings
        sig = inspect.signature(obj)
        named = [n for n, p in sig.parameters.items()
                 if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        unknown = [k for k in params if k not in named]
        if unknown:
            raise TypeError(f"reward '{name_or_path}' got unknown params {unknown}; "
                            f"it accepts {named[1:]}")
        bound = functools.partial(obj, **params)
        return bound
    return obj


GOLD_COLUMNS = ("answer", "solution")


class AnyOfGold:
    """Score rows whose gold answer is a list of alternatives by the best of them.

    A data loader gives a list (``["3", "\\frac{6}{2}"]``) when a dataset lists several
    accepted answers (Skywork-OR1's JSON list, AReaL's ``solutions``). The wrapped reward is
    called once on the batch expanded to one item per alternative; a row scores the maximum of
    its alternatives' scores that are not None, and None only when all are None. Rows with a
    single gold, and batch-level rewards, are passed through unchanged.

    >>> from rewards.open_r1 import Accuracy
    >>> AnyOfGold(Accuracy())([r"\\boxed{3}", r"\\boxed{4}"], answer=[["2", "3"], "5"])
    [1.0, 0.0]
    """

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, completions, **columns):
        key = next((k for k in GOLD_COLUMNS if isinstance(columns.get(k), (list, tuple))), None)
        gold = columns.get(key) if key else None
        if gold is None or not any(isinstance(g, (list, tuple)) for g in gold):
            return self.fn(completions, **columns)
        n = len(completions)
        owner, texts = [], []
        cols: dict = {k: [] for k in columns}
        for i, (text, g) in enumerate(zip(completions, gold)):
            for alt in (list(g) if isinstance(g, (list, tuple)) else [g]) or [None]:
                owner.append(i)
                texts.append(text)
                for k, v in columns.items():
                    if k == key:
                        cols[k].append(alt)
                    elif isinstance(v, (list, tuple)) and len(v) == n:
                        cols[k].append(v[i])
        for k, v in columns.items():          # columns that are not per-row pass as they are
            if not (isinstance(v, (list, tuple)) and len(v) == n):
                cols[k] = v
        scores = list(self.fn(texts, **cols))
        best: list = [None] * n
        for i, s in zip(owner, scores):
            if s is not None and (best[i] is None or s > best[i]):
                best[i] = s
        return best


def any_of_gold(fn: Callable) -> Callable:
    """``fn`` wrapped in :class:`AnyOfGold` (batch-level rewards are returned unchanged)."""
    return fn if is_batch_level(fn) or isinstance(fn, AnyOfGold) else AnyOfGold(fn)


def reward_names() -> list:
    """All registered reward names (built-ins loaded)."""
    load_builtin_rewards()
    return REWARDS.names()


__all__ = ["REWARDS", "resolve_reward", "batch_level", "is_batch_level",
           "load_builtin_rewards", "reward_names", "AnyOfGold", "any_of_gold"]
