"""MkDocs hook: fills ``<!-- registry: MODULE:NAME -->`` markers with a table of that registry.

Each row is a registered name, the object behind it and the first paragraph of its docstring,
read from the code while the site builds, so the API pages list exactly what the registries
hold. A marker naming a module or registry that does not exist fails the build.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

MARKER = re.compile(r"<!--\s*registry:\s*([\w.]+):(\w+)\s*-->")
REPO = Path(__file__).resolve().parents[2]


def _summary(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    first = doc.split("\n\n")[0]
    return " ".join(first.split()).replace("|", "\\|") or "-"


def registry_table(module: str, name: str) -> str:
    """The markdown table of registry ``name`` in ``module``."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    mod = importlib.import_module(module)
    loader = getattr(mod, "load_builtin_rewards", None)     # rewards register on import
    if loader is not None:
        loader()
    reg = getattr(mod, name)
    rows = ["| name | object | what it computes |", "|---|---|---|"]
    for key in reg.names():
        obj = reg.get(key)
        target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
        where = f"{target.__module__}.{target.__qualname__}"
        rows.append(f"| `{key}` | `{where}` | {_summary(obj)} |")
    return "\n".join(rows)


def on_page_markdown(markdown, page, config, files):   # noqa: ARG001 (MkDocs hook signature)
    return MARKER.sub(lambda m: registry_table(m.group(1), m.group(2)), markdown)
