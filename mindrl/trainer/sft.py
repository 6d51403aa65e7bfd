"""Supervised fine-tuning: masked next-token NLL on the trained response tokens.

Two kinds of rows (see :mod:`mindrl.data.conversations` for the formats and their detection):

- plain (problem, response) pairs: the prompt is rendered with the run's chat template exactly
  as RL renders it, and the response (``data.response_field``, default ``answer``) is followed
  by the end-of-turn token, so a model trained here stops where the RL rollout expects it to;
- conversations (chat formats): rendered whole with the run's chat template; the prompt is
  everything before the first assistant turn, the response region everything after, and its
  mask is 1 on the assistant turns' tokens (through their end-of-turn marker) and 0 on the
  user/system turns between them. The backends already train on ``response_mask`` only, so
  this is the whole change to the token batch.

With ``tools.enabled``, a plain response that is a tool trace (calls followed by the output
blocks the rollout loop appends, :func:`mindrl.tools.formats.split_trace`) is encoded piece by
piece, as a rollout builds it (each piece's ids alone), and the output blocks get mask 0:
tool output is left out of the SFT loss and its token count exactly as RL leaves it out.

The loss is summed over trained tokens and divided by the trained-token count of the whole
batch (``algorithms.sft_nll`` with token-mean aggregation), so micro-batching does not change
it. Data errors (a misspelt ``data.response_field``, a malformed turn) are raised while the
data is read, before the model loads; a template that cannot render the first rows fails
right after the model loads, before the first step.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from mindrl.trainer.base import Trainer, run_trainer
from mindrl.types import LossNormalizers, TokenBatch, pad_token_batch

log = logging.getLogger("mindrl.sft")

PREFLIGHT_ROWS = 64           # rows whose response field is checked before the model loads
TEMPLATE_CHECK_ROWS = 4       # rows rendered and tokenized right after the model loads


def refuse_rl_only_options(cfg, job: str) -> None:
    """Options only the RL step implements, refused before an SFT / preference job loads its
    model (they would be accepted and ignored)."""
    from mindrl.errors import ConfigError

    if cfg.train.padding_free:
        raise ConfigError(f"train.padding_free=true packs the rows of RL micro-batches; the "
                          f"{job} step pads them: set train.padding_free=false")


class SFTTrainer(Trainer):
    kind = "sft"

    def __init__(self, cfg):
        from mindrl.trainer.lengths import CutCounter, check_before_first_step

        refuse_rl_only_options(cfg, "SFT")
        super().__init__(cfg)
        self.cuts = CutCounter()
        # responses over data.max_response_len counted before the first step: the first
        # data.preflight_rows rows encoded as the steps encode them (conversations through the
        # chat template, which stops here when it cannot render one), or as the memory plan did
        line = check_before_first_step(self, lambda r: self.row_lengths(r)[1], "rows")
        if self.is_main:
            log.info("%s", line)
        checked = self.cfg.data.preflight_rows       # the template check: the rows past those
        rows = getattr(self.train_stream, "rows", None)
        if rows is None or checked >= TEMPLATE_CHECK_ROWS:
            rows = []
        elif not isinstance(rows, list):    # a FileStream: read its first rows
            rows = rows.get(range(min(len(rows), TEMPLATE_CHECK_ROWS)))
        for row in rows[checked:TEMPLATE_CHECK_ROWS]:
            if "messages" in row:
                self.chat_ids(row)

    # ----------------------------------------------------------------- data
    def build_streams(self, check: bool = True):
        """Chat-format files become conversation rows; everything else takes the RL loader
        (plain columns, built-in and generated sets) with its response field checked
        (``check``: and the data preflight run on them)."""
        from mindrl.data.conversations import (CHAT_FORMATS, detect_format,
                                               index_conversations, load_conversations)
        from mindrl.data.io import DataError, iter_rows
        from mindrl.trainer.prompts import FileStream, ListStream

        d = self.cfg.data
        path = Path(d.train_file).expanduser() if d.train_file else None
        if path is not None and not path.is_absolute() and not path.exists():
            from mindrl.data.location import candidate_dirs

            path = next((c / path for c in candidate_dirs(d.data_dir) if (c / path).exists()),
                        path)
        suffix = path.suffix.lower() if path is not None else ""
        if suffix in (".jsonl", ".ndjson", ".json", ".parquet") and path.is_file():
            first = next(iter(iter_rows(path, 1)), None)       # the format, from row 1 only
            if first is None:
                raise DataError(f"{path}: no rows")
            fmt, col = detect_format(first[1], d.format, d.response_field)
            if fmt in CHAT_FORMATS:
                kw = dict(max_rows=d.max_train_samples, prompt_field=d.prompt_field,
                          trace_select=d.trace_select)
                if suffix == ".json":                           # one document, read whole
                    train = ListStream(load_conversations(path, fmt, col, **kw),
                                       self.cfg.train.seed, d.shuffle)
                else:                                           # read as taken
                    train = FileStream(index_conversations(path, fmt, col, **kw),
                                       self.cfg.train.seed, d.shuffle)
                return train, self._val_rows()
        train, val = super().build_streams(check)
        rows = getattr(train, "rows", None)
        if isinstance(rows, list):
            probe = rows[:PREFLIGHT_ROWS]
        elif rows is not None:           # a FileStream: its first rows, read and mapped
            probe = rows.get(range(min(len(rows), PREFLIGHT_ROWS)))
        else:                            # a generator stream
            probe = copy.deepcopy(train).take(1)
        self._check_response_field(probe, d.train_file)
        if check:
            log.info("%s: detected: columns (problem <- the prompt field, response <- '%s')",
                     d.train_file, d.response_field or "answer")
        return train, val

    def _val_rows(self) -> List[Dict]:
        d = self.cfg.data
        if not d.val_file:
            return []
        from mindrl.data import load_prompts

        return load_prompts(d.val_file, data_dir=d.data_dir, prompt_field=d.prompt_field,
                            answer_field=d.answer_field, max_rows=d.max_val_samples or 0)

    def _check_response_field(self, rows, spec: str) -> None:
        from mindrl.data.io import DataError

        for i, row in enumerate(rows, 1):
            # rows mapped by mindrl.data.formats carry the target as 'response'
            field = "response" if "response" in row else (self.cfg.data.response_field
                                                          or "answer")
            if field not in row:
                raise DataError(f"{spec}: row {i}: field '{field}' (data.response_field): no "
                                f"such column; its fields are: {', '.join(sorted(row))}")
            v = row[field]
            if isinstance(v, (list, tuple, dict)) or v is None:
                raise DataError(f"{spec}: row {i}: field '{field}' (data.response_field) holds "
                                f"{'nothing' if v is None else 'a ' + type(v).__name__}, not "
                                f"text; a list of traces or turns needs data.format=traces / "
                                f"messages / sharegpt")

    # ----------------------------------------------------------------- tokens
    @property
    def end_of_turn(self):
        tid = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        return tid if isinstance(tid, int) and tid != self.tokenizer.unk_token_id else None

    @property
    def eos_id(self) -> int:
        return self.stop_ids[0] if self.end_of_turn is None else self.end_of_turn

    def response_ids_and_mask(self, row: Dict) -> Tuple[List[int], List[float]]:
        """(ids, mask) of a plain row's response plus the end-of-turn token; with
        ``tools.enabled``, tool output blocks are encoded alone and masked (0)."""
        field = "response" if "response" in row else (self.cfg.data.response_field or "answer")
        text = str(row[field])
        enc = lambda s: self.tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
        if not self.cfg.tools.enabled:
            ids = enc(text)
            return ids + [self.eos_id], [1.0] * (len(ids) + 1)
        from mindrl.tools.formats import split_trace

        ids: List[int] = []
        mask: List[float] = []
        for piece, trained in split_trace(text, self.cfg.tools.format):
            p = enc(piece)
            ids += p
            mask += [1.0 if trained else 0.0] * len(p)
        return ids + [self.eos_id], mask + [1.0]

    def chat_ids(self, row: Dict) -> Tuple[List[int], List[int], List[float]]:
        """(prompt ids, response ids, response mask) of a conversation row."""
        from mindrl.data.conversations import encode_conversation
        from mindrl.data.io import DataError
        from mindrl.data.templates import render_chat

        tok = self.tokenizer
        markers = [m for m in tok.convert_ids_to_tokens(list(self.stop_ids)) if m]

        def render(msgs, add_generation_prompt):
            return render_chat(msgs, self.cfg.model.chat_template, tokenizer=tok,
                               system_prompt=self.cfg.data.system_prompt,
                               add_generation_prompt=add_generation_prompt)

        try:
            return encode_conversation(row["messages"], render,
                                       lambda s: tok.encode(s, add_special_tokens=False),
                                       markers, self.eos_id)
        except ValueError as e:
            raise DataError(f"{row['where']}: chat template "
                            f"'{self.cfg.model.chat_template}': {e}") from None

    def row_lengths(self, row: Dict) -> Tuple[int, int]:
        """(prompt, response) tokens of ``row`` as :meth:`build_batch` encodes it, the response
        with its end-of-turn token and uncut."""
        if "messages" in row:
            p, resp, _ = self.chat_ids(row)
            return len(p), len(resp)
        return len(self.encode(row["problem"])), len(self.response_ids_and_mask(row)[0])

    def build_batch(self, rows: List[Dict]) -> TokenBatch:
        """The padded batch of ``rows``; responses cut at ``data.max_response_len`` (counted
        in the ``truncated`` metric)."""
        T = self.cfg.data.max_response_len
        prompts, responses, masks = [], [], []
        self._truncated = 0
        for r in rows:
            if "messages" in r:
                p, resp, m = self.chat_ids(r)
            else:
                p = self.encode(r["problem"])
                resp, m = self.response_ids_and_mask(r)
            self._truncated += len(resp) > T
            prompts.append(p)
            responses.append(resp[:T])
            masks.append(m[:T])
        tokens = pad_token_batch(prompts, responses, self.pad_id)
        for i, m in enumerate(masks):
            tokens.response_mask[i, :len(m)] = m
        return tokens

    def run_step(self) -> Dict[str, float]:
        t0 = time.perf_counter()
        rows = self._take_rows()
        tokens = self.build_batch(rows)
        norm = LossNormalizers(global_tokens=float(self.allsum(tokens.response_mask.sum())),
                               global_seqs=float(self.allsum(len(rows))),
                               max_len=float(self.cfg.rollout.max_new_tokens))
        mb = max(1, self.cfg.train.micro_batch_size)
        micro = [tokens.rows(np.arange(s, min(s + mb, len(rows)))) for s in range(0, len(rows), mb)]
        metrics = self.backend.sft_step(micro, norm)
        metrics["time/step"] = time.perf_counter() - t0
        metrics["tokens"] = float(norm.global_tokens)
        metrics.update(self.cuts.metrics(float(self.allsum(self._truncated))))  # cut at T
        if self.cfg.tools.enabled:         # tool output tokens left out of the loss
            masked = float(self.allsum(tokens.attention_mask[:, tokens.prompt_len:].sum()
                                       - tokens.response_mask.sum()))
            metrics["tools/masked_output_tokens"] = masked
        return metrics


def train_sft(cfg) -> Dict[str, float]:
    """Run SFT from a resolved config; returns the last step's metrics."""
    return run_trainer(SFTTrainer, cfg)
