"""Saving an RL run's rollouts: ``RUN_DIR/rollouts/step_NNNNNN.jsonl``, one line per rollout.

With ``logging.save_rollouts: N`` the rollouts of step 1 and of every N-th step are written, so
that a person can read them (``mindrl show-rollouts``) and score them again under another
policy (``mindrl analyze logprob-quantiles``). One record (one JSON line)::

    step, index (row in the step's batch), group (prompt within the step), sample (within group)
    problem, answer          the data row's fields (when present)
    prompt, prompt_ids       the rendered prompt, as text and as the token ids the engine saw
    response, response_ids   the sampled response, as text and token ids (EOS included)
    finish_reason            "stop" or "length"
    rewards                  {reward key: value or null (unscorable)}, before weighting
    reward_outputs           {reward key: text} of model rewards (a judge's verdict; null where
                             it did not read the rollout), only when the run has one
    reward                   the weighted sum the advantages were computed from
    advantage                mean advantage over the response tokens (outcome estimators give
                             every token the same value; token_advantages appears otherwise)
    rollout_logprobs         the engine's log p of each response token

Files are written whole (a temporary file, then a rename), so a crash never leaves a torn file;
a resumed run rewrites the steps it redoes. Under data parallelism rank r > 0 writes
``step_NNNNNN.rank<r>.jsonl`` beside rank 0's file. ``logging.save_rollouts_max_mb`` caps the
directory: the first step that would pass it is not written, a warning says so, and saving stops.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from mindrl.jsonl import write_text_atomic

log = logging.getLogger("mindrl.train")

ROLLOUT_DIR = "rollouts"


def step_file(run_dir, step: int, rank: int = 0) -> Path:
    tail = "" if rank == 0 else f".rank{rank}"
    return Path(run_dir) / ROLLOUT_DIR / f"step_{step:06d}{tail}.jsonl"


def _num(x) -> Optional[float]:
    x = float(x)
    return x if np.isfinite(x) else None


def rollout_records(step: int, rows: List[Dict], ro, sc, adv: np.ndarray, mask: np.ndarray,
                    tokenizer, first_index: int = 0) -> List[Dict]:
    """The records of one step's rollouts (see the module docstring).

    ``ro`` is a :class:`mindrl.types.Rollouts`, ``sc`` a :class:`mindrl.trainer.base.Scored`
    (components with NaN for unscorable), ``adv`` and ``mask`` are (B, T)."""
    out = []
    n_per_group = np.bincount(ro.group_index) if len(ro) else np.zeros(0, np.int64)
    seen: Dict[int, int] = {}
    prompt_text: Dict[int, str] = {}
    for i in range(len(ro)):
        g = int(ro.group_index[i])
        j = seen.get(g, 0)
        seen[g] = j + 1
        if g not in prompt_text:
            prompt_text[g] = tokenizer.decode(ro.prompt_ids[i], skip_special_tokens=False,
                                              clean_up_tokenization_spaces=False)
        L = len(ro.response_ids[i])
        a = adv[i, :L][mask[i, :L] > 0].astype(np.float64)
        row = rows[g] if g < len(rows) else {}
        rec = {"step": step, "index": first_index + i, "group": g, "sample": j,
               "group_size": int(n_per_group[g]),
               "problem": row.get("problem"), "answer": row.get("answer"),
               "prompt": prompt_text[g], "prompt_ids": [int(t) for t in ro.prompt_ids[i]],
               "response": ro.texts[i] if ro.texts else tokenizer.decode(
                   ro.response_ids[i], skip_special_tokens=True),
               "response_ids": [int(t) for t in ro.response_ids[i]],
               "finish_reason": ro.finish_reasons[i],
               "rewards": {k: _num(v[i]) for k, v in sc.components.items()},
               "reward": _num(sc.total[i]),
               "advantage": float(a.mean()) if a.size else 0.0,
               "rollout_logprobs": [round(float(x), 6) for x in ro.logprobs[i]]}
        outputs = getattr(sc, "outputs", None) or {}
        if outputs:                                  # a judge's text, where it read the item
            rec["reward_outputs"] = {k: v[i] for k, v in outputs.items()}
        if a.size and np.ptp(a) > 1e-6:
            rec["token_advantages"] = [round(float(x), 6) for x in a]
        out.append(rec)
    return out


class RolloutLog:
    """Decides which steps to save and writes them, within a size cap."""

    def __init__(self, run_dir, every: int, max_mb: float, rank: int = 0):
        self.run_dir, self.every, self.rank = Path(run_dir), int(every), int(rank)
        self.max_bytes = int(max_mb * 2 ** 20)
        self.stopped = False
        d = self.run_dir / ROLLOUT_DIR
        self.used = sum(p.stat().st_size for p in d.glob("step_*.jsonl")) if d.is_dir() else 0

    def wants(self, step: int) -> bool:
        return self.every > 0 and not self.stopped and (step == 1 or step % self.every == 0)

    def save(self, step: int, rows, ro, sc, adv, mask, tokenizer,
             first_index: int = 0) -> Optional[Path]:
        """Write step ``step``'s rollouts if it is a step to save; returns the file or None."""
        if not self.wants(step):
            return None
        recs = rollout_records(step, rows, ro, sc, adv, mask, tokenizer, first_index)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)
        path = step_file(self.run_dir, step, self.rank)
        old = path.stat().st_size if path.is_file() else 0   # a resumed run rewrites the step
        size = len(text.encode("utf-8"))
        if self.used - old + size > self.max_bytes:
            self.stopped = True
            log.warning("step %d: saving its rollouts (%.1f MB) would take %s past "
                        "logging.save_rollouts_max_mb=%.1f (%.1f MB used): rollouts are no "
                        "longer saved in this run", step, size / 2 ** 20,
                        self.run_dir / ROLLOUT_DIR, self.max_bytes / 2 ** 20,
                        self.used / 2 ** 20)
            return None
        write_text_atomic(path, text)
        self.used += size - old
        return path


def save_step_rollouts(trainer, rows, ro, sc, adv, mask) -> Optional[Path]:
    """The trainer's hook (called once per RL step, before ``trainer.step`` is incremented):
    saves this rank's rollouts when ``logging.save_rollouts`` asks for this step."""
    lg = trainer.cfg.logging
    if not lg.save_rollouts:
        return None
    rl = getattr(trainer, "_rollout_log", None)
    if rl is None:
        rl = trainer._rollout_log = RolloutLog(trainer.run_dir, lg.save_rollouts,
                                               lg.save_rollouts_max_mb, trainer.rank)
    return rl.save(trainer.step + 1, rows, ro, sc, adv, mask, trainer.tokenizer,
                   first_index=trainer.rank * len(ro))
