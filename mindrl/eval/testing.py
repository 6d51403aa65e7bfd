"""Fault injection for tests of the evaluation runner (importable by Ray workers).

:class:`EngineFactory` builds the normal engine wrapped in a :class:`CountingEngine`, which
counts the rollouts it generates and can simulate two failures: ``interrupt_after=k`` raises
KeyboardInterrupt on the (k+1)-th ``generate`` call (a user's Ctrl-C); ``die_marker=path``
makes the first engine that finds no file at ``path`` create it and kill its own process with
``os._exit(1)`` inside ``generate`` (a worker crash, exactly once per marker).
"""

from __future__ import annotations

import os
from pathlib import Path

from mindrl.eval.engines import default_engine_factory


class CountingEngine:
    def __init__(self, inner, interrupt_after: int = -1, die_marker: str = ""):
        self.inner, self.calls, self.rollouts = inner, 0, 0
        self.interrupt_after, self.die_marker = interrupt_after, die_marker

    def generate(self, prompt_ids, sampling):
        if self.die_marker and not Path(self.die_marker).exists():
            Path(self.die_marker).write_text(str(os.getpid()))
            os._exit(1)
        if self.calls == self.interrupt_after:
            raise KeyboardInterrupt("simulated interrupt")
        self.calls += 1
        out = self.inner.generate(prompt_ids, sampling)
        self.rollouts += len(out)
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


class EngineFactory:
    """Picklable factory wrapping the default engine in a :class:`CountingEngine`."""

    def __init__(self, interrupt_after: int = -1, die_marker: str = ""):
        self.interrupt_after, self.die_marker = interrupt_after, die_marker
        self.engines = []

    def __call__(self, spec):
        e = CountingEngine(default_engine_factory(spec), self.interrupt_after, self.die_marker)
        self.engines.append(e)
        return e

    def __getstate__(self):
        return {"interrupt_after": self.interrupt_after, "die_marker": self.die_marker,
                "engines": []}

    @property
    def rollouts(self) -> int:
        return sum(e.rollouts for e in self.engines)
