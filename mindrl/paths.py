"""Paths checked before any work starts.

- Output paths: a run directory, an eval directory or an output file whose path runs through an
  existing file (``logging.output_dir=/data/notes.txt/run``) would otherwise fail at ``mkdir``,
  after the model has loaded, with a traceback.
- Model directories: what a Hugging Face model directory must hold, and the run and checkpoint
  folders that name one (:func:`locate_model_dir`, :func:`check_model_dir`). Reads no weights
  and imports no framework; ``builtin:`` names are resolved by :mod:`mindrl.models.tiny`.
- The data directory of the published data sets (:func:`candidate_dirs`, :func:`data_root`;
  :mod:`mindrl.data.location` says the order and finds files there).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Type

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


class ModelPathError(UserError, FileNotFoundError, ValueError):
    """``model.path`` names no usable model: an unknown ``builtin:`` name, a missing directory,
    or one without config.json / tokenizer / weights. (A FileNotFoundError and a ValueError
    too, for callers that catch those.)"""


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model")


# A checkpoint written by the trainer (mindrl/trainer/checkpoint.py):
#   RUN/checkpoints/step_000004/{model/, state/, trainer.json, config.yaml, manifest.json, COMPLETE}
# model/ is the Hugging Face directory; a checkpoint is complete once manifest.json and COMPLETE
# are both written (COMPLETE last, then the folder is renamed into place).
CKPT_MODEL = "model"
CKPT_ROOT = "checkpoints"
CKPT_COMPLETE = ("manifest.json", "COMPLETE")


def complete_steps(root: Path) -> List[Path]:
    """Complete checkpoint folders under ``root`` (``step_<N>``), oldest first."""
    found = []
    for p in root.glob("step_*"):
        tail = p.name[len("step_"):]
        if tail.isdigit() and all((p / f).is_file() for f in CKPT_COMPLETE):
            found.append((int(tail), p))
    return [p for _, p in sorted(found)]


def locate_model_dir(path: str) -> str:
    """The Hugging Face model directory that ``path`` names, accepting what a run writes:

    - a model directory (has config.json): itself;
    - a checkpoint step folder (``RUN/checkpoints/step_000004``, has ``model/``): its ``model/``;
    - a run folder (``RUN``, has ``checkpoints/``) or its ``checkpoints/`` folder: the
      ``model/`` of its newest complete checkpoint (manifest.json and COMPLETE written).

    Anything else (a missing path, a run folder without a complete checkpoint) is returned
    unchanged, for :func:`check_model_dir` to say what it lacks. Reads no weights."""
    p = Path(path).expanduser()
    if not p.is_dir() or (p / "config.json").is_file():
        return path
    if (p / CKPT_MODEL / "config.json").is_file():
        return str(p / CKPT_MODEL)
    root = p / CKPT_ROOT if (p / CKPT_ROOT).is_dir() else p
    steps = [s for s in complete_steps(root) if (s / CKPT_MODEL).is_dir()]
    if steps:
        return str(steps[-1] / CKPT_MODEL)
    return path


def _what_was_looked_for(p: Path) -> str:
    """Why ``p`` (a directory without config.json) is no model, as a run folder or step folder."""
    root = p / CKPT_ROOT if (p / CKPT_ROOT).is_dir() else p
    partial = sorted(x.name for x in root.glob("step_*") if x.is_dir())
    if partial:
        return (f"; {root} holds {', '.join(partial[-3:])} but no complete checkpoint "
                f"(step_*/ with {' and '.join(CKPT_COMPLETE)} and a {CKPT_MODEL}/ folder)")
    return (f"; it is not a checkpoint step folder either (no {CKPT_MODEL}/config.json) nor a "
            f"run folder (no {CKPT_ROOT}/step_*/ with {' and '.join(CKPT_COMPLETE)})")


def check_model_dir(path: str, key: str = "model.path") -> None:
    """Raise :class:`ModelPathError` (a FileNotFoundError) naming ``key`` (where the path came
    from) and what is missing from a Hugging Face model directory (config.json, tokenizer
    files, weights), before anything heavy is imported. A checkpoint step folder or a run
    folder is checked as the model directory it names (:func:`locate_model_dir`)."""
    given = Path(path).expanduser()
    if not given.is_dir():
        raise ModelPathError(f"{key}: model directory {path} does not exist (use "
                             "'builtin:tiny' for the embedded tiny model)")
    p = Path(locate_model_dir(str(given)))
    missing = []
    if not (p / "config.json").is_file():
        missing.append("config.json")
    if not any((p / f).is_file() for f in TOKENIZER_FILES):
        missing.append("tokenizer files (" + " or ".join(TOKENIZER_FILES) + ")")
    has_weights = any((p / f).is_file() for f in WEIGHT_FILES) or any(p.glob("*.safetensors"))
    if not has_weights:
        missing.append("weights (" + " or ".join(WEIGHT_FILES[:1] + ("*.safetensors",)) + ")")
    if missing:
        where = path if p == given else f"{p} (in {path})"
        why = _what_was_looked_for(given) if p == given and "config.json" in missing else ""
        raise ModelPathError(f"{key}: model directory {where} lacks: " + "; ".join(missing)
                             + why)


def step_dir(root, step: int) -> Path:
    """The folder of the checkpoint of ``step`` under a run's ``checkpoints/`` folder."""
    return Path(root) / f"step_{step:06d}"


# ------------------------------------------------------------------ the data directory
# (mindrl.data.location documents the order and finds files in it)
REPO_ROOT = Path(__file__).resolve().parents[1]
CHECKOUT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"


def user_data_dir() -> Path:
    """``$XDG_CACHE_HOME/mindrl/data``, else ``~/.cache/mindrl/data``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "mindrl" / "data"


def _explicit(data_dir) -> Optional[Path]:
    if data_dir in (None, ""):
        return None
    p = Path(str(data_dir)).expanduser()
    if not p.is_absolute() and not p.exists() and (REPO_ROOT / p).exists():
        p = REPO_ROOT / p
    return p


def candidate_dirs(data_dir=None) -> List[Path]:
    """The data directories searched, in order (see the module docstring)."""
    explicit = _explicit(data_dir)
    if explicit is not None:
        return [explicit]
    env = os.environ.get("MINDRL_DATA_DIR")
    if env:
        return [Path(env).expanduser()]
    dirs = [user_data_dir()]
    if CHECKOUT_DATA_DIR.is_dir():
        dirs.append(CHECKOUT_DATA_DIR)
    return dirs


def data_root(data_dir=None) -> Path:
    """The data directory: the first candidate that exists, else the first (where a fetch
    writes)."""
    dirs = candidate_dirs(data_dir)
    return next((d for d in dirs if d.is_dir()), dirs[0])
