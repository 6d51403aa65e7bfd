"""Which config keys a run reads: :func:`recording` instruments the frozen config dataclasses
of :mod:`mindrl.config.schema` so that every read of a field (``cfg.train.lr``) made by the
code that runs is recorded as its dotted key (``train.lr``).

Reads made by the config machinery itself do not count: the loader's type and cross-field
checks (``mindrl/config/``), and whole-config copies and comparisons (``dataclasses.asdict`` /
``replace`` and the generated ``__eq__`` / ``__repr__``, which touch every field)."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import typing
from contextlib import contextmanager
from typing import Dict, Iterator, Set

from mindrl.config.loader import describe
from mindrl.config.schema import RunConfig

_CONFIG_DIR = os.path.dirname(os.path.abspath(sys.modules["mindrl.config.schema"].__file__))
_DATACLASSES = os.path.abspath(dataclasses.__file__)


def section_prefixes(cls: type = RunConfig, prefix: str = "") -> Dict[type, str]:
    """Each config dataclass -> the dotted prefix of its fields ("train.", "model.lora.",
    "reward.functions[]." for the items of a list). A class used at two places would make
    reads ambiguous: refused."""
    out: Dict[type, str] = {cls: prefix}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        item = typing.get_args(tp)[0] if typing.get_origin(tp) in (list, typing.List) else None
        for sub, sub_prefix in ((tp, f"{prefix}{f.name}."),
                                (item, f"{prefix}{f.name}[].")):
            if sub is not None and dataclasses.is_dataclass(sub):
                for c, p in section_prefixes(sub, sub_prefix).items():
                    if c in out:
                        raise AssertionError(f"{c.__name__} is used at {out[c]} and {p}")
                    out[c] = p
    return out


def leaf_keys() -> Set[str]:
    """Every option's dotted key, as ``mindrl config show --keys`` lists them."""
    return {row[0] for row in describe()}


def _counts(filename: str) -> bool:
    return not (filename.startswith(_CONFIG_DIR) or filename == _DATACLASSES
                or filename.startswith("<"))


@contextmanager
def recording() -> Iterator[Set[str]]:
    """Yield a set that collects the dotted keys read while the block runs (every thread)."""
    reads: Set[str] = set()
    lock = threading.Lock()
    patched = []
    for cls, prefix in section_prefixes().items():
        names = {f.name for f in dataclasses.fields(cls)}

        def hook(self, name, _names=names, _prefix=prefix):
            if name in _names and _counts(sys._getframe(1).f_code.co_filename):
                key = _prefix + name
                with lock:
                    reads.add(key)
                    if _prefix.endswith("[]."):        # an item's field reads the list too
                        reads.add(_prefix[:-3])
            return object.__getattribute__(self, name)

        assert "__getattribute__" not in cls.__dict__, cls
        cls.__getattribute__ = hook
        patched.append(cls)
    try:
        yield reads
    finally:
        for cls in patched:
            del cls.__getattribute__
