"""Response lengths of SFT and preference data: no response is cut without a word.

Responses (SFT targets, DPO/SimPO chosen and rejected, each with its end-of-turn token) longer
than ``data.max_response_len`` tokens are cut to it. Before the first step the trainer encodes
the first ``data.preflight_rows`` rows exactly as its steps do and :func:`check_response_lengths`
logs how many would be cut and the longest; when more than ``data.max_truncated_share`` of them
would be, the run stops with one line naming both keys. Every step counts the rows it cut
(:class:`CutCounter`: the step's ``truncated`` metric and the run's ``truncated/total``, which
the end-of-run summary reports).

The memory plan measures the same rows before anything loads (:func:`measure_data`: the model's
tokenizer alone, the rows read and encoded by the trainer's own code) and plans activations for
their longest prompt plus their longest response, as a step pads them, instead of the worst row
``data.max_prompt_len + data.max_response_len``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import List, Optional, Sequence

log = logging.getLogger("mindrl.data")


def check_response_lengths(lengths: Sequence[int], cfg, what: str = "rows") -> str:
    """The line saying how many of the checked ``lengths`` (one per row: its longest response,
    in tokens) exceed ``data.max_response_len``; raises :class:`~mindrl.data.io.DataError`
    when their share exceeds ``data.max_truncated_share``."""
    d = cfg.data
    limit = d.max_response_len
    if not lengths:
        return "response lengths: no rows checked"
    long = [n for n in lengths if n > limit]
    longest = max(lengths)
    if len(long) > d.max_truncated_share * len(lengths):
        from mindrl.data.io import DataError

        raise DataError(
            f"data.max_response_len={limit}: {len(long)} of the first {len(lengths)} {what} "
            f"have a response longer than that (longest {longest} tokens) and would be cut, "
            f"more than data.max_truncated_share={d.max_truncated_share:g}; raise "
            f"data.max_response_len (or data.max_truncated_share to train on cut responses)")
    if long:
        return (f"response lengths: {len(long)} of the first {len(lengths)} {what} have a "
                f"response longer than data.max_response_len={limit} (longest {longest} "
                f"tokens) and will be cut to it")
    return (f"response lengths: all of the first {len(lengths)} {what} fit "
            f"data.max_response_len={limit} (longest {longest} tokens)")


def first_rows(stream, n: int) -> List:
    """Up to ``n`` of a training stream's first rows, without moving the stream."""
    import copy

    rows = getattr(stream, "rows", None)
    if isinstance(rows, list):
        return rows[:n]
    if rows is not None:                        # a FileStream: read its first rows
        return rows.get(range(min(len(rows), n)))
    return copy.deepcopy(stream).take(n)        # a generator stream


class CutCounter:
    """Rows cut to ``data.max_response_len``: this step's and the run's (since it started or
    resumed)."""

    def __init__(self):
        self.total = 0

    def metrics(self, cut_this_step: float) -> dict:
        self.total += int(cut_this_step)
        return {"truncated": float(cut_this_step), "truncated/total": float(self.total)}


def check_before_first_step(trainer, response_len, what: str) -> str:
    """Before the first step of an SFT or preference ``trainer``: its first
    ``data.preflight_rows`` rows, each measured by ``response_len(row)`` (tokens, as the steps
    encode it), checked by :func:`check_response_lengths`, whose line is returned for the caller
    to log. A refusal closes what the trainer started (engine, reward workers) and propagates."""
    try:
        rows = first_rows(trainer.train_stream, trainer.cfg.data.preflight_rows)
        return check_response_lengths([response_len(r) for r in rows], trainer.cfg, what)
    except Exception:
        trainer.close()
        raise


@dataclass(frozen=True)
class DataLengths:
    """The longest rows of an SFT or preference data set as the steps pad them: a step's rows
    are padded to its longest prompt plus its longest response (preference: the longer of
    chosen and rejected), so no micro-batch is wider than ``prompt + response``."""

    prompt: int = 0              # longest prompt, tokens after the chat template (rows that fit
    #                              data.max_prompt_len: the trainer skips the others)
    response: int = 0            # longest response + its end-of-turn token, uncut
    rows: int = 0                # rows measured (0 = the data was not read)
    total: Optional[int] = None  # rows in the data (None: generated, no end)
    why_not: str = ""            # why the data was not read

    def text(self, prompt_limit: int, limit: int) -> str:
        """One line: the lengths the plan uses and where they come from (``prompt_limit``,
        ``limit``: ``data.max_prompt_len``, ``data.max_response_len``)."""
        if not self.rows:
            return worst_row_text(prompt_limit, limit) + f": {self.why_not}"
        cut = "cut to data.max_response_len" if self.response > limit else \
            f"under data.max_response_len={limit}"
        if self.total is not None and self.rows >= self.total:
            which = f"all {self.total} rows of the data"
        else:
            of = f" of {self.total}" if self.total is not None else " generated"
            which = f"the first {self.rows}{of} rows (more: data.preflight_rows)"
        return (f"prompt {self.prompt} + response {min(self.response, limit)} tokens, the "
                f"longest of {which}, {cut}")


def worst_row_text(prompt_limit: int, limit: int) -> str:
    return (f"prompt {prompt_limit} (data.max_prompt_len) + response {limit} "
            "(data.max_response_len) tokens, the worst row")


def measure_data(cfg, job: str) -> DataLengths:
    """The :class:`DataLengths` of the first ``data.preflight_rows`` rows of an SFT (``job``
    sft) or preference (dpo, simpo, pref) run, read and encoded as its trainer does with the
    model's tokenizer alone; when the tokenizer or the data cannot be read here, an empty one
    whose ``why_not`` says why (the run's own data checks report data errors)."""
    from mindrl.data.io import DataError
    from mindrl.data.preflight import load_tokenizer
    from mindrl.errors import ConfigError

    try:
        from mindrl.models.tiny import resolve_model_path

        path = resolve_model_path(cfg.model.path)
    except (ConfigError, OSError, ValueError) as e:
        return DataLengths(why_not=f"model.path={cfg.model.path!r}: {_first_line(e)}")
    tok = load_tokenizer(path, cfg.model.trust_remote_code)
    if tok is None:
        return DataLengths(why_not=f"no tokenizer at model.path={cfg.model.path!r} here")
    if job == "sft":
        from mindrl.trainer.sft import SFTTrainer as cls
    else:
        from mindrl.trainer.preference import PreferenceTrainer as cls
    enc = cls.for_tokens(cfg, tok)
    limit = cfg.data.max_prompt_len
    try:
        stream, _ = enc.build_streams(check=False)
        rows = first_rows(stream, cfg.data.preflight_rows)
        sizes = [enc.row_lengths(r) for r in rows if len(enc.encode(r["problem"])) <= limit]
    except (DataError, ConfigError, ValueError, OSError, KeyError) as e:
        return DataLengths(why_not=f"data.train_file={cfg.data.train_file!r} not read here "
                                   f"({_first_line(e)})")
    if not sizes:
        return DataLengths(why_not=f"no row of data.train_file={cfg.data.train_file!r} has a "
                                   f"prompt within data.max_prompt_len={limit}")
    inner = getattr(stream, "rows", None)
    total = None if inner is None else len(inner)
    return DataLengths(prompt=max(p for p, _ in sizes), response=max(r for _, r in sizes),
                       rows=len(rows), total=total)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
