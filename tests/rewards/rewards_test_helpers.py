"""Module-level rewards for pool tests (workers import them by name)."""

import os
import time


def sleepy(completions, **columns):
    """Hangs on a completion equal to 'hang', sleeps S seconds on 'sleep:S', crashes its process
    on 'crash', raises on 'raise'; else scores len(completion)."""
    out = []
    for c in completions:
        if c == "hang":
            time.sleep(600)
        if c.startswith("sleep:"):
            time.sleep(float(c[len("sleep:"):]))
        if c == "crash":
            os._exit(3)
        if c == "raise":
            raise RuntimeError("bad item")
        out.append(float(len(c)))
    return out


def batch_mean_len(completions, **columns):
    mean = sum(map(len, completions)) / len(completions)
    return [len(c) - mean for c in completions]


batch_mean_len.batch_level = True
