"""Rewards that misbehave on purpose, for the scoring service and server tests.

A completion ``"sleep:S"`` sleeps S seconds, ``"spin:S"`` burns CPU for S seconds, ``"crash"`` kills its worker process, ``"raise"``
raises, ``"nan"`` scores NaN; anything else scores its length. Imported by worker processes as
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
        elif text == "nan":
            out.append(float("nan"))
            continue
        out.append(float(len(text)))
    return out
