"""Supervised fine-tuning: masked next-token NLL on the response tokens.

Rows are (problem, response) pairs; the prompt is rendered with the run's chat template exactly
as RL renders it, and the response is followed by the end-of-turn token, so a model trained here
stops where the RL rollout expects it to. The loss is summed over response tokens and divided by
the response-token count of the whole batch (``algorithms.sft_nll`` with token-mean
aggregation), so micro-batching does not change it.
"""

from __future__ import annotations

import logging
import time
from typing import Dict

import numpy as np

from mindrl.trainer.base import Trainer, run_trainer
from mindrl.types import LossNormalizers, pad_token_batch

log = logging.getLogger("mindrl.sft")


class SFTTrainer(Trainer):
    kind = "sft"

    def response_ids(self, row: Dict) -> list:
        field = "response" if "response" in row else (self.cfg.data.response_field or "answer")
        ids = self.tokenizer.encode(str(row[field]), add_special_tokens=False)
        return ids + [self.stop_ids[0] if self.end_of_turn is None else self.end_of_turn]

    @property
    def end_of_turn(self):
        tid = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        return tid if isinstance(tid, int) and tid != self.tokenizer.unk_token_id else None

    def run_step(self) -> Dict[str, float]:
        t0 = time.perf_counter()
        rows = self._take_rows()
        prompts = [self.encode(r["problem"]) for r in rows]
        responses = [self.response_ids(r)[:self.cfg.rollout.max_new_tokens] for r in rows]
        tokens = pad_token_batch(prompts, responses, self.pad_id)
        norm = LossNormalizers(global_tokens=float(self.allsum(tokens.response_mask.sum())),
                               global_seqs=float(self.allsum(len(rows))),
                               max_len=float(self.cfg.rollout.max_new_tokens))
        mb = max(1, self.cfg.train.micro_batch_size)
        micro = [tokens.rows(np.arange(s, min(s + mb, len(rows)))) for s in range(0, len(rows), mb)]
        metrics = self.backend.sft_step(micro, norm)
        metrics["time/step"] = time.perf_counter() - t0
        metrics["tokens"] = float(norm.global_tokens)
        return metrics


def train_sft(cfg) -> Dict[str, float]:
    """Run SFT from a resolved config; returns the last step's metrics."""
    return run_trainer(SFTTrainer, cfg)
