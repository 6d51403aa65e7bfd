"""The data preflight: before any model loads, show one example as the run will see it and stop
when the gold answers cannot be scored.

``train``, ``sft``, ``dpo``/``simpo`` and ``eval`` call it on the rows they loaded:

1. one line naming the file, its row count and the mapping used (``detected: verl (problem <-
   prompt, answer <- reward_model.ground_truth, id <- extra_info.index)``);
2. the first row as the job sees it: problem, gold answer (RL, eval), target (SFT) or chosen /
   rejected (DPO), and the prompt after the chat template;
3. RL: every configured reward is called on the first ``data.preflight_rows`` rows with an empty
   completion. A reward that returns None for a row cannot score it whatever the model writes
   (``accuracy`` returns None exactly when the gold answer does not parse). Eval: the gold
   answers are checked with ``rewards.math_grader.gold_answer`` / ``gold_is_usable``. When more
   than ``data.preflight_max_unscorable`` of the rows fail, the run stops with one line naming
   the file, the answer field and a failing row.

During RL training the same kind of stop guards every step (:func:`check_step_unscorable`).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional, Sequence

from mindrl.data.io import DataError, where

log = logging.getLogger("mindrl.data")

DEFAULT_ROWS = 64
DEFAULT_MAX_UNSCORABLE = 0.1


def _short(x: Any, n: int = 160) -> str:
    s = x if isinstance(x, str) else repr(x)
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[:n - 3] + "..."


def _answer_path(plan) -> str:
    if plan is None:
        return "answer"
    return ",".join(plan.paths.get("answer") or ["answer"])


def _fix_hint(plan) -> str:
    src = getattr(plan, "source", "FILE")
    return (f"name the field with the final answer (data.answer_field=... / --answer-field; "
            f"`mindrl data inspect {src}` shows the columns and the mapping)")


def check_golds(rows: Sequence[Dict], plan, limit: int = DEFAULT_ROWS,
                max_unscorable: float = DEFAULT_MAX_UNSCORABLE) -> None:
    """Eval: stop when more than ``max_unscorable`` of the first ``limit`` gold answers are
    unusable to the math grader (any-of lists: usable when one item is)."""
    from rewards.math_grader import gold_answer, gold_is_usable  # noqa: PLC0415

    head = list(rows[:limit])
    bad = []
    for i, r in enumerate(head):
        golds = r.get("answer")
        golds = golds if isinstance(golds, list) else [golds]
        if not any(gold_is_usable(gold_answer(g), timeout=2.0) for g in golds):
            bad.append(i)
    _stop_if(bad, head, plan, max_unscorable, "the math grader")


def _stop_if(bad: List[int], head: Sequence[Dict], plan, max_unscorable: float,
             who: str) -> None:
    if head and len(bad) / len(head) > max_unscorable:
        i = bad[0]
        src = getattr(plan, "source", "data")
        raise DataError(f"{src}: field '{_answer_path(plan)}': {who} cannot score {len(bad)} "
                        f"of the first {len(head)} gold answers (more than "
                        f"{max_unscorable:.0%}; e.g. {where(src, i + 1)}: "
                        f"{_short(head[i].get('answer'), 80)}); {_fix_hint(plan)}")


def check_rewards(rows: Sequence[Dict], plan, reward_functions: Sequence[Any],
                  limit: int = DEFAULT_ROWS,
                  max_unscorable: float = DEFAULT_MAX_UNSCORABLE) -> None:
    """RL: call each configured reward on the first rows with an empty completion; stop when
    more than ``max_unscorable`` of them score None under any reward."""
    from rewards.registry import any_of_gold, resolve_reward  # noqa: PLC0415

    head = list(rows[:limit])
    if not head:
        return
    n = len(head)
    columns = {k: [r.get(k) for r in head] for k in head[0]}
    columns["completion_lengths"] = [0] * n
    columns["finish_reasons"] = ["stop"] * n
    src = getattr(plan, "source", "data")
    for fc in reward_functions:
        name = fc["name"] if isinstance(fc, dict) else getattr(fc, "name", str(fc))
        params = (fc.get("params") if isinstance(fc, dict) else getattr(fc, "params", None)) or {}
        fn = any_of_gold(resolve_reward(name, params))
        try:
            scores = list(fn([""] * n, **columns))
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{src}: reward '{name}' cannot read the rows ({e}); its fields "
                            f"are: {', '.join(map(str, head[0]))}") from None
        bad = [i for i, s in enumerate(scores) if s is None]
        _stop_if(bad, head, plan, max_unscorable, f"reward '{name}'")


def check_step_unscorable(components: Dict[str, Any], max_share: float, step: int,
                          answer_field: str = "", source: str = "") -> None:
    """RL training: stop when a reward scored None for more than ``max_share`` of a step's
    rollouts (``components``: name -> gathered scores, NaN = None)."""
    import numpy as np  # noqa: PLC0415

    for name, vals in components.items():
        vals = np.asarray(vals, dtype=np.float64)
        if vals.size and np.isnan(vals).mean() > max_share:
            src = f"{source}: " if source else ""
            raise DataError(f"{src}step {step}: reward '{name}' could not score "
                            f"{int(np.isnan(vals).sum())} of {vals.size} rollouts (more than "
                            f"{max_share:.0%}, data.step_max_unscorable); check the gold "
                            f"answers in field '{answer_field or 'answer'}' "
                            f"(data.answer_field) with `mindrl data inspect`")


def _rendered(problem: str, cfg, tokenizer) -> str:
    from mindrl.data.templates import TEMPLATES, render_prompt  # noqa: PLC0415

    template = cfg.model.chat_template
    if tokenizer is None and TEMPLATES.get(template).needs_tokenizer:
        tokenizer = _tokenizer(cfg.model.path)
        if tokenizer is None:
            return f"(template '{template}' needs the model's tokenizer; shown once it loads)"
    try:
        return render_prompt(problem, template, tokenizer=tokenizer,
                             system_prompt=cfg.data.system_prompt)
    except ValueError as e:
        return f"(template '{template}': {e})"


def _tokenizer(path: str):
    if not path or not os.path.isdir(path):
        return None
    try:
        from transformers import AutoTokenizer  # noqa: PLC0415

        return AutoTokenizer.from_pretrained(path)
    except Exception:  # noqa: BLE001 - only the example print depends on it
        return None


def example_lines(row: Dict, job: str, plan, cfg=None, tokenizer=None,
                  count: Optional[int] = None) -> List[str]:
    """The lines that show one mapped row as ``job`` sees it."""
    src = getattr(plan, "source", None)
    head = f"data: {src}" if src else "data: built-in set"
    if count is not None:
        head += f" ({count} rows)"
    lines = [head + (f": {plan.describe()}" if plan is not None else "")]
    lines.append(f"  problem: {_short(row.get('problem'))}")
    sys_turn = getattr(row.get("problem"), "system", "")
    if sys_turn:
        lines.append(f"  system turn: {_short(sys_turn)}")
    if job in ("rl", "eval"):
        lines.append(f"  gold answer: {_short(row.get('answer'))}"
                     + (f"  (id {row['id']})" if "id" in row else ""))
    elif job == "sft":
        lines.append(f"  target: {_short(row.get('response'))}")
    else:
        lines.append(f"  chosen: {_short(row.get('chosen'))}")
        lines.append(f"  rejected: {_short(row.get('rejected'))}")
    if cfg is not None:
        lines.append(f"  prompt after template '{cfg.model.chat_template}': "
                     f"{_short(_rendered(row['problem'], cfg, tokenizer), 400)}")
    return lines


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0") or 0) == 0


def preflight(cfg, job: str, plan, rows: Sequence[Dict], check: bool = True,
              count: Optional[int] = None) -> List[str]:
    """Show the first row as ``job`` will see it (logged on rank 0) and run the checks of the
    module docstring; returns the lines shown. ``count``: the data set's row count when
    ``rows`` holds only its first rows (default ``len(rows)``)."""
    if not rows:
        raise DataError(f"{getattr(plan, 'source', 'data')}: no rows")
    lines = example_lines(rows[0], job, plan, cfg, count=len(rows) if count is None else count)
    if is_main_process():
        for line in lines:
            log.info("%s", line)
    d = cfg.data
    if check and job == "rl":
        check_rewards(rows, plan, cfg.reward.functions, d.preflight_rows,
                      d.preflight_max_unscorable)
    return lines
