"""Where the published data files live on this machine.

The data directory holds the built-in benchmark and training files in one layout::

    DATA/eval/math500_test.simplerl.jsonl   DATA/train/gsm8k_train.openai.jsonl   DATA/tasks/...

It is resolved once per lookup, first match wins:

1. ``data.data_dir`` (the config key) or ``--data-dir`` (the commands), when set;
2. the ``MINDRL_DATA_DIR`` environment variable;
3. the user cache: ``$XDG_CACHE_HOME/mindrl/data`` (default ``~/.cache/mindrl/data``), where
   ``mindrl data fetch NAME`` writes (:mod:`mindrl.data.fetch`);
4. a ``shared/data`` folder beside a source checkout, when one exists (a development set-up
   that keeps the files next to the repository).

A file missing from all of them raises :class:`MissingDataError`, one line that names the
command that downloads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

from mindrl.data.io import DataError

# the resolution itself lives in mindrl.paths (below every room: the sandbox hides the directory)
from mindrl.paths import (CHECKOUT_DATA_DIR, REPO_ROOT, candidate_dirs,  # noqa: F401,E402
                          data_root, user_data_dir)


class MissingDataError(DataError, FileNotFoundError):
    """A built-in data file that is not on this machine (``mindrl data fetch`` gets it)."""


def find_data_file(relpath: str, data_dir=None, fetch_name: str = "") -> Path:
    """``DIR/relpath`` for the first candidate directory that holds it; a directory given as
    ``.../data/eval`` also finds ``eval/x.jsonl`` by its base name. Raises
    :class:`MissingDataError` naming where it looked and ``mindrl data fetch fetch_name``."""
    rel = Path(relpath)
    dirs = candidate_dirs(data_dir)
    for d in dirs:
        for cand in (d / rel, d / rel.name):
            if cand.is_file():
                return cand
    raise MissingDataError(missing_message(relpath, dirs, fetch_name))


def missing_message(relpath: str, dirs: List[Path], fetch_name: str = "") -> str:
    where = " or ".join(str(d) for d in dirs)
    how = (f"download it with `mindrl data fetch {fetch_name}`" if fetch_name
           else "set data.data_dir / MINDRL_DATA_DIR to the directory that holds it")
    return (f"data file not found: {relpath} (looked in {where}); {how}, or set "
            f"MINDRL_DATA_DIR to a copy")
