"""Reading the rollouts a run saved (``logging.save_rollouts``, see
:mod:`mindrl.trainer.rollout_log`) and printing them for a person (``mindrl show-rollouts``)."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from mindrl.errors import UserError
from mindrl.trainer.rollout_log import ROLLOUT_DIR

REQUIRED = ("step", "group", "prompt_ids", "response_ids")
_STEP_RE = re.compile(r"^step_(\d+)(?:\.rank(\d+))?\.jsonl$")


class AnalyzeError(UserError):
    """Bad input to an analysis tool: a missing run, a step not saved, a mismatched reference."""


def _rollout_dir(run_dir) -> Path:
    run = Path(run_dir).expanduser()
    if not run.is_dir():
        raise AnalyzeError(f"run directory not found: {run}")
    d = run / ROLLOUT_DIR
    if not d.is_dir() or not any(d.glob("step_*.jsonl")):
        raise AnalyzeError(f"{run}: no saved rollouts (no {ROLLOUT_DIR}/step_*.jsonl); train "
                           f"with logging.save_rollouts=N to save every N-th step's rollouts")
    return d


def saved_steps(run_dir) -> List[int]:
    """The steps whose rollouts ``run_dir`` holds, ascending."""
    d = _rollout_dir(run_dir)
    steps = {int(m.group(1)) for p in d.iterdir() if (m := _STEP_RE.match(p.name))}
    return sorted(steps)


def load_step(run_dir, step: int) -> List[Dict]:
    """All records of one saved step (every rank's file), ordered by ``index``."""
    d = _rollout_dir(run_dir)
    files = sorted(p for p in d.iterdir() if (m := _STEP_RE.match(p.name))
                   and int(m.group(1)) == step)
    if not files:
        have = saved_steps(run_dir)
        raise AnalyzeError(f"{Path(run_dir)}: step {step} was not saved; saved steps: "
                           f"{', '.join(map(str, have))}")
    recs: List[Dict] = []
    for path in files:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise AnalyzeError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
            missing = [k for k in REQUIRED if k not in r]
            if missing:
                raise AnalyzeError(f"{path}:{lineno}: rollout record has no field "
                                   f"'{missing[0]}' (is this a mindrl rollouts file?)")
            recs.append(r)
    recs.sort(key=lambda r: r.get("index", 0))
    return recs


def load_steps(run_dir, steps: Optional[Sequence[int]] = None) -> Dict[int, List[Dict]]:
    """{step: records} for ``steps`` (default: every saved step)."""
    steps = saved_steps(run_dir) if not steps else list(steps)
    return {s: load_step(run_dir, s) for s in steps}


# --------------------------------------------------------------------------- show-rollouts
def _fmt(x) -> str:
    return "None" if x is None else f"{x:.3g}"


def format_rollouts(records: List[Dict], group: Optional[int] = None, limit: int = 0,
                    width: int = 0, max_chars: int = 0) -> str:
    """Text for a terminal: per group the problem and prompt once, then each response with its
    reward per function, total reward, advantage, length and finish reason."""
    width = width or min(shutil.get_terminal_size((100, 20)).columns, 120)
    if group is not None:
        groups = sorted({r["group"] for r in records})
        records = [r for r in records if r["group"] == group]
        if not records:
            raise AnalyzeError(f"step has no group {group}; groups: "
                               f"{', '.join(map(str, groups))}")
    if limit:
        records = records[:limit]
    out: List[str] = []
    last = None
    rule = "=" * width

    def block(text: str, indent: str) -> None:
        text = str(text)
        if max_chars and len(text) > max_chars:
            text = text[:max_chars] + f" [... {len(text) - max_chars} more characters]"
        for para in text.split("\n"):
            out.extend(indent + x for x in textwrap.wrap(para, width - len(indent)) or [""])

    for r in records:
        key = (r.get("step"), r["group"])
        if key != last:
            last = key
            out += [rule, f"step {r.get('step')}  group {r['group']}  "
                          f"({r.get('group_size', '?')} samples)"
                          + (f"  gold answer: {r['answer']}" if r.get("answer") is not None
                             else ""), rule]
            out.append("PROMPT:")
            block(r.get("prompt", ""), "  ")
        rewards = ", ".join(f"{k}={_fmt(v)}" for k, v in (r.get("rewards") or {}).items())
        out.append("-" * width)
        out.append(f"sample {r.get('sample', '?')}  reward {_fmt(r.get('reward'))}"
                   f" ({rewards})  advantage {r.get('advantage', 0.0):+.3f}  "
                   f"{len(r['response_ids'])} tokens, {r.get('finish_reason', '?')}")
        out.append("RESPONSE:")
        block(r.get("response", ""), "  ")
    return "\n".join(out)
