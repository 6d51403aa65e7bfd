"""One registry type for everything chosen by name from a config.

Used for advantage estimators, policy losses, KL estimators, aggregation modes, rewards,
rollout engines and training backends. Duplicate names are rejected at registration; a lookup
miss raises :class:`RegistryError` listing the valid names and the closest match.
"""

from __future__ import annotations

import difflib
from typing import Dict, Generic, Iterator, List, Optional, TypeVar

T = TypeVar("T")


class RegistryError(KeyError):
    """A name registered twice, or a reward path that does not resolve. (A lookup miss raises
    a plain ``KeyError`` with the same kind of message, which compiled MindSpore code accepts.)"""

    def __str__(self) -> str:  # KeyError quotes its argument; we want plain text
        return str(self.args[0]) if self.args else ""


def error_text(e: BaseException) -> str:
    """The message of an exception without KeyError's quotes."""
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


def closest(name: str, candidates: List[str]) -> Optional[str]:
    """The closest candidate to ``name`` by edit similarity, or None."""
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5)
    return match[0] if match else None


class Registry(Generic[T]):
    """A name -> object table for one kind of thing (``kind`` appears in messages).

    >>> losses = Registry("policy loss")
    >>> @losses.register("vanilla")
    ... def vanilla(): ...
    >>> losses.get("vanila")
    Traceback (most recent call last):
    ...
    KeyError: "unknown policy loss 'vanila'; did you mean 'vanilla'? valid names: vanilla"
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._items: Dict[str, T] = {}

    def register(self, name: str, obj: Optional[T] = None):
        """Register ``obj`` under ``name``; usable as ``@registry.register("name")``."""

        def add(item: T) -> T:
            if name in self._items:
                raise RegistryError(f"{self.kind} '{name}' is already registered")
            self._items[name] = item
            return item

        if obj is not None:
            return add(obj)
        return add

    def get(self, name: str) -> T:
        # No try/except and a builtin exception type here: mindspore.jit's default (AST)
        # capture accepts only those, and losses look their parts up inside compiled steps.
        if name in self._items:
            return self._items[name]
        raise KeyError(self._miss_message(name))

    def _miss_message(self, name: str) -> str:
        valid = sorted(self._items)
        hint = closest(name, valid)
        did_you_mean = f"; did you mean '{hint}'?" if hint else ";"
        return f"unknown {self.kind} '{name}'{did_you_mean} valid names: {', '.join(valid)}"

    def names(self) -> List[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
