"""The recipe catalogue: what each file in ``yaml_configs/`` runs, on what, and what it is for.

``mindrl recipes`` prints it; ``mindrl train --help`` lists the names. Each row is read from the
recipe itself, so the table cannot drift from the files:

- job: ``stages: a -> b`` for a multi-stage recipe, else what its name starts with (``sft_``,
  ``dpo_``, ``simpo_``; everything else is RL, run by ``mindrl train``);
- backend and model from the resolved config (``builtin:*`` models are the offline CPU models);
- kind: ``demo`` (a CPU demo that learns), ``smoke`` (a CPU-sized run on a built-in model: a
  full recipe's CI form, or a first try on your data) or ``full`` (real scale: GPU or Ascend, a
  real checkpoint);
- purpose: the recipe's ``# summary:`` comment line, else the first sentence of its header.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import List, Optional

from mindrl.config.loader import REPO_CONFIGS

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


@dataclasses.dataclass(frozen=True)
class RecipeInfo:
    name: str
    job: str
    backend: str
    model: str
    kind: str
    purpose: str


def _header(path: Path) -> List[str]:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return lines


def _purpose(header: List[str], width: int) -> str:
    for line in header:
        if line.lower().startswith("summary:"):
            return line.split(":", 1)[1].strip()
    text = " ".join(x for x in header if x)
    m = re.search(r"(?<=[a-z0-9)\]])[.:;](\s|$)", text)
    first = text[: m.start()] if m else text
    if len(first) > width:
        first = first[: width - 1].rsplit(" ", 1)[0] + "…"
    return first


def _job(name: str, stages) -> str:
    if len(stages) > 1:
        runs = [s.run for s in stages]
        if len(set(runs)) == 1:
            return f"{len(runs)} stages ({runs[0]})"
        return " -> ".join(runs)
    for prefix in ("sft", "dpo", "simpo"):
        if name.startswith(prefix + "_"):
            return prefix
    return "train"


def _model(path: str) -> str:
    if path.startswith("builtin:"):
        return path + " (CPU)"
    m = _SIZE.search(Path(path).name)
    return f"{m.group(1)}B" if m else "a checkpoint"


def _kind(name: str, model_path: str) -> str:
    if name.endswith("_demo") or "_demo_" in name:
        return "demo"
    if model_path.startswith("builtin:"):
        return "smoke"
    return "full"


def recipe_info(path: Path, width: int = 72) -> RecipeInfo:
    from mindrl.config.stages import load_stages

    stages = load_stages(str(path))
    cfg = stages[0].cfg
    return RecipeInfo(name=path.stem, job=_job(path.stem, stages), backend=cfg.backend,
                      model=_model(cfg.model.path), kind=_kind(path.stem, cfg.model.path),
                      purpose=_purpose(_header(path), width))


def list_recipes(directory: Optional[Path] = None) -> List[RecipeInfo]:
    """Every recipe of ``directory`` (default: the project's ``yaml_configs/``), by name."""
    directory = directory or REPO_CONFIGS
    return [recipe_info(p) for p in sorted(directory.glob("*.yaml"))]


def format_table(rows: List[RecipeInfo]) -> str:
    heads = ("recipe", "job", "backend", "model", "kind", "purpose")
    cells = [heads] + [(r.name, r.job, r.backend, r.model, r.kind, r.purpose) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(heads) - 1)]
    out = []
    for c in cells:
        out.append("  ".join(v.ljust(w) for v, w in zip(c, widths)) + "  " + c[-1])
    return "\n".join(out)


def recipe_names() -> List[str]:
    return sorted(p.stem for p in REPO_CONFIGS.glob("*.yaml"))
