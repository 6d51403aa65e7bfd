"""Output paths checked before any work starts: a run directory, an eval directory or an output
file whose path runs through an existing file (``logging.output_dir=/data/notes.txt/run``) would
otherwise fail at ``mkdir``, after the model has loaded, with a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Type

from mindrl.errors import UserError


def output_path_problem(path: str, is_dir: bool = True) -> Optional[str]:
    """None when ``path`` can be created (or already is a directory / a file, as asked); else
    what stands in the way, in words. Creates nothing."""
    p = Path(path).expanduser()
    if p.exists():
        if is_dir and not p.is_dir():
            return f"{p} exists and is not a directory"
        if not is_dir and p.is_dir():
            return f"{p} is a directory"
        return None
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is a file, so nothing can be created under it"
            return None
    return None


def check_output_path(path: str, key: str, is_dir: bool = True,
                      error: Type[UserError] = UserError, where: str = "") -> None:
    """Raise ``error`` naming ``key`` (a config key or a command-line option) and ``where`` its
    value came from when ``path`` cannot be created as a directory (``is_dir``) or a file."""
    problem = output_path_problem(path, is_dir)
    if problem:
        origin = f" (from {where})" if where else ""
        raise error(f"{key}={path!r}{origin}: {problem}")
