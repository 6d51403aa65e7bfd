"""Preference optimisation: DPO, IPO and SimPO (each with an optional SFT term, ``pref_ftx``).

Data: JSONL/JSON/parquet rows in any preference format of :mod:`mindrl.data.formats`: TRL's
``prompt``/``chosen``/``rejected`` (strings, or chat messages: the last assistant turn), the
format ``mindrl data pairs`` writes, or the seed's ``id, prompt, completion_1, completion_2,
preferred``. The prompt is rendered with the run's chat
template and each response is followed by the end-of-turn token, as in SFT and RL.

Per step: a batch of pairs -> reference log-probs of both responses (DPO and IPO; SimPO needs no
reference model) -> ``backend.preference_step`` over micro-batches, the loss divided by the
number of pairs in the whole step (``algorithms.preference_loss``). Metrics: the preference loss
and the SFT loss apart, reward accuracy and margin, chosen and rejected rewards.
"""

from __future__ import annotations

import logging
import time
from typing import Dict, List, Tuple

import numpy as np

from mindrl.trainer.base import Trainer, run_trainer
from mindrl.trainer.prompts import ListStream
from mindrl.types import pad_token_batch

log = logging.getLogger("mindrl.preference")

def load_pairs(path: str, max_rows: int = 0, data_cfg=None):
    """Rows with ``problem``, ``chosen``, ``rejected`` (format detected, or ``data.format``;
    field paths from ``data.prompt_field`` / ``chosen_field`` / ``rejected_field``); a missing
    field names the file, the 1-based line/row and the field. Returns the rows; with
    ``data_cfg`` given, ``(plan, rows)``."""
    from mindrl.data.formats import fields_from, load_file

    fields = fields_from(data_cfg) if data_cfg is not None else {}
    fields = {k: fields.get(k, "") for k in ("problem", "chosen", "rejected")}
    plan, rows = load_file(path, "pref", getattr(data_cfg, "format", "auto"), fields, max_rows,
                           getattr(data_cfg, "templated_prompts", "auto"))
    return (plan, rows) if data_cfg is not None else rows


class PreferenceTrainer(Trainer):
    kind = "pref"

    def __init__(self, cfg):
        from mindrl.trainer.lengths import CutCounter, check_before_first_step
        from mindrl.trainer.sft import refuse_rl_only_options

        refuse_rl_only_options(cfg, "preference (DPO / SimPO)")
        super().__init__(cfg)
        self.cuts = CutCounter()
        # responses over data.max_response_len counted before the first step
        line = check_before_first_step(self, lambda r: self.row_lengths(r)[1], "pairs")
        if self.is_main:
            log.info("%s", line)

    def needs_reference(self) -> bool:
        return self.cfg.preference.loss in ("dpo", "ipo")

    def build_streams(self, check: bool = True):
        """The pairs of ``data.train_file`` (``check``: with the data preflight run on them)."""
        d = self.cfg.data
        if not d.train_file:
            raise ValueError("data.train_file is empty: point it at a JSONL of preference pairs "
                             "(prompt, chosen, rejected), e.g. one written by `mindrl data pairs`")
        from mindrl.data.preflight import preflight

        plan, rows = load_pairs(d.train_file, d.max_train_samples, d)
        if check:
            preflight(self.cfg, "pref", plan, rows)
        return ListStream(rows, self.cfg.train.seed, d.shuffle), []

    def _encode(self, text: str) -> List[int]:
        """A response's ids followed by the end-of-turn token, uncut."""
        eot = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if not isinstance(eot, int) or eot == self.tokenizer.unk_token_id:
            eot = self.stop_ids[0]
        return self.tokenizer.encode(text, add_special_tokens=False) + [eot]

    def row_lengths(self, row: Dict) -> Tuple[int, int]:
        """(prompt, longer response) tokens of a pair as :meth:`run_step` encodes it, the
        responses with their end-of-turn token and uncut."""
        return len(self.encode(row["problem"])), max(len(self._encode(row["chosen"])),
                                                     len(self._encode(row["rejected"])))

    def response(self, text: str) -> List[int]:
        """:meth:`_encode` cut to ``data.max_response_len`` tokens (the end-of-turn token kept
        last)."""
        ids = self._encode(text)
        limit = self.cfg.data.max_response_len
        return ids if len(ids) <= limit else ids[:limit - 1] + ids[-1:]

    def run_step(self) -> Dict[str, float]:
        t0 = time.perf_counter()
        rows = self._take_rows()
        prompts = [self.encode(r["problem"]) for r in rows]
        full_c = [self._encode(r["chosen"]) for r in rows]
        full_r = [self._encode(r["rejected"]) for r in rows]
        limit = self.cfg.data.max_response_len
        cut = sum(max(len(c), len(r)) > limit for c, r in zip(full_c, full_r))
        chosen = pad_token_batch(prompts, [self.response(r["chosen"]) for r in rows], self.pad_id)
        rejected = pad_token_batch(prompts, [self.response(r["rejected"]) for r in rows],
                                   self.pad_id)
        mb = max(1, self.cfg.train.micro_batch_size)
        ref_c = ref_r = None
        if self.needs_reference():
            ref_c = self.backend.logprobs(chosen, temperature=1.0, reference=True,
                                          micro_batch_size=mb)
            ref_r = self.backend.logprobs(rejected, temperature=1.0, reference=True,
                                          micro_batch_size=mb)
        t_ref = time.perf_counter() - t0
        micro = []
        for s in range(0, len(rows), mb):
            idx = np.arange(s, min(s + mb, len(rows)))
            micro.append((chosen.rows(idx), rejected.rows(idx),
                          None if ref_c is None else ref_c[idx],
                          None if ref_r is None else ref_r[idx]))
        metrics = self.backend.preference_step(micro, float(self.allsum(len(rows))))
        metrics["time/ref_logprobs"] = t_ref
        metrics.update(self.cuts.metrics(float(self.allsum(cut))))   # pairs cut this step
        metrics["time/step"] = time.perf_counter() - t0
        return metrics


def train_preference(cfg) -> Dict[str, float]:
    """Run DPO / IPO / SimPO from a resolved config; returns the last step's metrics."""
    return run_trainer(PreferenceTrainer, cfg)
