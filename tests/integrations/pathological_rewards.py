"""Rewards that misbehave on purpose, for the scoring service and server tests.

A completion ``"sleep:S"`` sleeps S seconds, ``"spin:S"`` burns CPU for S seconds, ``"crash"``
kills its worker process, ``"raise"`` raises, ``"nan"`` scores NaN, ``"none"`` scores None;
anything else scores its length. Imported by worker processes as
``pathological_rewards:slow_len`` (tests/integrations is on their sys.path).
"""

import os
import time


def slow_len(completions, **columns):
    out = []
    for text in completions:
        if text.startswith("sleep:"):
            time.sleep(float(text.split(":", 1)[1]))
        elif text.startswith("spin:"):
            end = time.monotonic() + float(text.split(":", 1)[1])
            while time.monotonic() < end:
                pass
        elif text == "crash":
            os._exit(3)
        elif text == "raise":
            raise RuntimeError("asked to raise")
        elif text in ("nan", "none"):
            out.append(float("nan") if text == "nan" else None)
            continue
        out.append(float(len(text)))
    return out


def scaled_len(completions, scale=1.0, **columns):
    """``scale * len(text)``; ``scale`` is a setting (``params``), not a column."""
    return [scale * len(text) for text in completions]
