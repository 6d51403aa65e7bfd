"""How long an SFT or preference run's rows are, for the memory plan: measured before anything
loads, with the model's tokenizer alone and the trainer's own code (``Trainer.for_tokens``,
``row_lengths``), on the rows the response-length check reads (the first
``data.preflight_rows``; :mod:`mindrl.trainer.lengths`). A step pads its rows to its longest
prompt plus its longest response, so the plan's activations are for that width instead of the
worst row ``data.max_prompt_len + data.max_response_len``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mindrl.data.measured import remember_measured
from mindrl.trainer.lengths import first_rows


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
    whose ``why_not`` says why (the run's own data checks report data errors). What it measured
    is left for the same run's checks (:func:`mindrl.data.measured.remember_measured`)."""
    import dataclasses

    from mindrl.data.io import DataError
    from mindrl.data.preflight import load_tokenizer
    from mindrl.errors import ConfigError

    try:
        from mindrl.models.tiny import resolve_model_path

        path = resolve_model_path(cfg.model.path)
    except (ConfigError, OSError, ValueError) as e:
        return DataLengths(why_not=f"model.path={cfg.model.path!r}: {_first_line(e)}")
    # the configuration as the trainer holds it (model.path resolved): the key of what is left
    run_cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, path=path))
    tok = load_tokenizer(path, cfg.model.trust_remote_code)
    if tok is None:
        return DataLengths(why_not=f"no tokenizer at model.path={cfg.model.path!r} here")
    if job == "sft":
        from mindrl.trainer.sft import SFTTrainer as cls
    else:
        from mindrl.trainer.preference import PreferenceTrainer as cls
    enc = cls.for_tokens(run_cfg, tok)
    limit = cfg.data.max_prompt_len
    try:
        stream, _ = enc.build_streams(check=False)
        rows = first_rows(stream, cfg.data.preflight_rows)
        prompts = [len(enc.encode(r["problem"])) for r in rows]
        every = [enc.row_lengths(r) for r in rows]
    except (DataError, ConfigError, ValueError, TypeError, OSError, KeyError) as e:
        return DataLengths(why_not=f"data.train_file={cfg.data.train_file!r} not read here "
                                   f"({_first_line(e)})")
    remember_measured(cls.kind, run_cfg, rows, prompts, every)
    sizes = [s for n, s in zip(prompts, every) if n <= limit]
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
