"""What the memory plan measured on an SFT or preference run's first ``data.preflight_rows``
rows (:func:`mindrl.memory.data_lengths.measure_data`), kept in this process for the same run's
checks, so that each of those rows is encoded once: the data preflight's prompt lengths
(:func:`mindrl.data.preflight.check_prompt_lengths`) and the response-length check before the
first step (:func:`mindrl.trainer.lengths.check_before_first_step`). A row the plan did not
measure, or a run whose configuration differs, is encoded as before.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

# What the memory plan measured on a run's first data.preflight_rows rows, by (job kind: sft,
# pref; the run's configuration with model.path resolved, as the trainer holds it): each row
# (by its repr) -> (prompt tokens as Trainer.encode makes them, the trainer's row_lengths)
_MEASURED: Dict[Tuple[str, str], Dict[str, Tuple[int, Tuple[int, int]]]] = {}


def remember_measured(kind: str, cfg, rows: Sequence, prompts: Sequence[int],
                      sizes: Sequence[Tuple[int, int]]) -> None:
    """Keep the plan's measurement of ``rows`` for the same run's checks (:func:`measured`)."""
    _MEASURED[(kind, repr(cfg))] = {repr(r): (n, tuple(s))
                                    for r, n, s in zip(rows, prompts, sizes)}


def measured(kind: str, cfg, rows: Sequence, take: bool = False
             ) -> Optional[List[Tuple[int, Tuple[int, int]]]]:
    """(prompt tokens, row_lengths) of each of ``rows`` as the plan measured them for a run of
    ``kind`` under ``cfg``, or None unless it measured every one of them; ``take``: forget the
    measurement (the last check that reads it)."""
    key = (kind, repr(cfg))
    known = _MEASURED.get(key)
    if not known or not rows:
        return None
    out = [known.get(repr(r)) for r in rows]
    if take:
        _MEASURED.pop(key, None)
    return None if any(x is None for x in out) else out
