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

4. prompt lengths (RL, SFT, DPO): the first rows' prompts are rendered with the chat template
   and tokenized as the trainer does; the ones longer than ``data.max_prompt_len`` are counted
   (with the longest, the median and the limit; the trainer skips them). When none fits, the
   run stops with one line naming ``data.max_prompt_len`` (:func:`no_prompt_fits`, the line the
   trainer also stops with when a whole epoch yields no prompt that fits);
5. RL: the reward self-check (:func:`check_ideal_completions`). Each gold answer is written as
   a model would answer: its final answer alone (the number after ``####``, a boxed or
   "final answer is" answer; a gold that is prose with no final answer stops the run), in the
   answer format the prompt asks for (``\boxed{}``, ``<answer>`` tags, ``#### N``: read from the
   rendered prompt and the system prompt; when the prompt names none, the format of
   :data:`ANSWER_FORMATS` under which most rows earn every checked reward's maximum), and scored. A reward
   that earns its maximum on fewer than ``1 - data.preflight_max_unscorable`` of the rows
   cannot pay a right answer on this data: the run stops with one line naming the reward, the
   answer field and a row. Rewards with no notion of a gold answer (length, repetition,
   overlong penalties, step counts, tool-call checks, rewards from import paths) are left out,
   and the output says so;
6. a warning when ``train.prompts_per_step`` exceeds the rows of the data (each step repeats rows).

During RL training the same kind of stop guards every step (:func:`check_step_unscorable`).
"""

from __future__ import annotations

import logging
import os
import re
import statistics
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mindrl.data.io import DataError, where

log = logging.getLogger("mindrl.data")

# the preflight's warnings of this command, repeated in the run summary
# (mindrl.trainer.summary), which empties the list
RUN_WARNINGS: List[str] = []

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


# ----------------------------------------------------------------------------- reward self-check
# How an ideal completion writes its final answer {a} after its reasoning {r}: each answer
# format the built-in rewards read (Open-R1's and the GSM8K/Logic-RL/Mini-R1 <think>/<answer>
# tags, MATH's \boxed{}, GSM8K's "#### N", the CPU demos' bare answer).
ANSWER_FORMATS: Tuple[Tuple[str, str], ...] = (
    ("bare answer", "{r}\n{a}"),
    ("<think>/<answer> tags", "<think>\n{r}\n</think>\n<answer>\n{a}\n</answer>"),
    ("compact <think>/<answer> tags", "<think>{r}</think>\n<answer>{a}</answer>"),
    ("\\boxed{}", "{r}\nThe final answer is $\\boxed{{{a}}}$."),
    ("<answer>\\boxed{}</answer> tags",
     "<think>\n{r}\n</think>\n<answer>\n\\boxed{{{a}}}\n</answer>"),
    ("#### N", "{r}\n#### {a}"),
)
FILLER = "Let me work it out step by step."    # reasoning when the data has no worked solution


def requested_formats(prompt: str) -> List[int]:
    r"""The indices of :data:`ANSWER_FORMATS` a prompt asks for (its instruction names
    ``\boxed``, ``<answer>`` tags, or ``####``); every index when it names none.

    >>> [ANSWER_FORMATS[i][0] for i in requested_formats(r"put your final answer within \boxed{}")]
    ['\\boxed{}']
    >>> len(requested_formats("What is 2 + 3?")) == len(ANSWER_FORMATS)
    True
    """
    names = [n for n, _ in ANSWER_FORMATS]
    tags, boxed = "<answer>" in prompt, "\\boxed" in prompt
    if tags and boxed:
        want = ["<answer>\\boxed{}</answer> tags"]
    elif tags:
        want = ["<think>/<answer> tags", "compact <think>/<answer> tags"]
    elif boxed:
        want = ["\\boxed{}"]
    elif "####" in prompt:
        want = ["#### N"]
    else:
        return list(range(len(ANSWER_FORMATS)))
    return [names.index(w) for w in want]


def is_final_answer(text: Optional[str]) -> bool:
    r"""Whether a gold answer, as :func:`rewards.math_grader.gold_answer` cuts it, is a final
    answer a model could write in a box (a number, an expression, a word or two, a letter),
    not prose: fewer than three words once LaTeX commands and ``\text{}`` are removed.

    >>> is_final_answer("31"), is_final_answer(r"\frac{1}{2}\text{ of the cake}")
    (True, True)
    >>> is_final_answer("We work it out step by step, which gives 31 in total.")
    False
    """
    if not text:
        return False
    s = re.sub(r"\\(?:text|mathrm|textbf|mbox)\{[^{}]*\}", " ", str(text))
    s = re.sub(r"\\[A-Za-z]+", " ", s)
    return len(re.findall(r"[A-Za-z]{2,}", s)) < 3


def _final_answer(row: Dict) -> Optional[str]:
    from rewards.math_grader import gold_answer  # noqa: PLC0415

    gold = row.get("answer", row.get("solution"))
    if isinstance(gold, (list, tuple)):           # any-of golds: the first alternative
        gold = gold[0] if gold else None
    return gold_answer(gold)


def _kk_solution(row: Dict) -> Optional[str]:
    from rewards.knights_knaves import _gold_roles, solution_text  # noqa: PLC0415

    sol = row.get("solution")
    if sol is None:
        return None
    if isinstance(sol, str):
        return sol
    order, roles = _gold_roles(sol, row.get("names"))
    return solution_text(order, [roles[n] for n in order])


def _equation(row: Dict) -> Optional[str]:
    from rewards.countdown import _nums, solve_countdown  # noqa: PLC0415

    if isinstance(row.get("solution"), str):
        return row["solution"]
    if row.get("nums") is None or row.get("target") is None:
        return None
    return solve_countdown(_nums(row["nums"]), float(row["target"]))


class IdealSpec:
    """What the self-check knows about a built-in reward: how a right answer reads for it
    (``answer``: row -> text, None for a format reward, which has no gold answer but fixes the
    completion's shape), its maximum (``best``: the reward callable -> float), and the columns
    it reads the gold answer from (named in the stop line)."""

    def __init__(self, answer: Optional[Callable[[Dict], Optional[str]]],
                 best: Callable[[Any], float] = lambda fn: 1.0, field: str = ""):
        self.answer, self.best, self.field = answer, best, field


IDEAL: Dict[str, IdealSpec] = {
    "arithmetic": IdealSpec(_final_answer),
    "accuracy": IdealSpec(_final_answer),
    "cosine": IdealSpec(_final_answer, lambda fn: fn.max_value_correct),
    "gsm8k_accuracy": IdealSpec(_final_answer),
    "kk_roles": IdealSpec(_final_answer),
    "tool_final_answer": IdealSpec(_final_answer),
    "kk_answer": IdealSpec(_kk_solution, lambda fn: fn.correct, "solution"),
    "countdown_equation": IdealSpec(_equation, field="nums,target"),
    "format": IdealSpec(None), "tag_count": IdealSpec(None), "gsm8k_format": IdealSpec(None),
    "kk_format": IdealSpec(None), "countdown_format": IdealSpec(None),
}


# the math rewards, whose gold answer is a final answer a model writes (in a box, after ####)
MATH_FINAL_ANSWER = ("accuracy", "cosine", "gsm8k_accuracy")


def _reasoning(row: Dict) -> str:
    """The data's own worked solution (a GSM8K rationale before its ``####`` line, calculator
    annotations removed), or "" when the row has none."""
    raw = row.get("answer_raw")
    if not isinstance(raw, str) or "####" not in raw:
        return ""
    return re.sub(r"<<[^>]*>>", "", raw.rsplit("####", 1)[0]).strip()


def _write(fmt: str, reasoning: str, answer: str, opened_think: bool) -> str:
    text = fmt.format(r=reasoning or ("" if fmt.startswith("{r}\n{a}") else FILLER),
                      a=answer).strip()
    if opened_think and text.startswith("<think>"):  # the prompt already opened <think>
        text = text[len("<think>"):].lstrip("\n")
    return text


def _entry(fc) -> Tuple[str, Dict]:
    if isinstance(fc, dict):
        return fc["name"], fc.get("params") or {}
    return getattr(fc, "name", str(fc)), getattr(fc, "params", None) or {}


def check_ideal_completions(rows: Sequence[Dict], plan, reward_functions: Sequence[Any],
                            limit: int = DEFAULT_ROWS,
                            max_unscorable: float = DEFAULT_MAX_UNSCORABLE,
                            opened_think: bool = False, prompt: str = "") -> List[str]:
    """RL: score the first ``limit`` gold answers, each written as a model would answer (its
    final answer, in the format ``prompt`` asks for: :func:`requested_formats`), with the
    configured rewards; raise :class:`DataError` when more than ``max_unscorable`` of the gold
    answers have no final answer (:func:`is_final_answer`), or when a reward earns its maximum
    on fewer than ``1 - max_unscorable`` of the rows. Returns the lines that report the check.
    ``opened_think``: the prompt ends with ``<think>`` (the completion then starts inside the
    think block)."""
    from rewards.registry import any_of_gold, resolve_reward  # noqa: PLC0415

    head = list(rows[:limit])
    checked, skipped = [], []
    prose_checked = set()         # math rewards: their gold must be a final answer, not prose
    for fc in reward_functions:
        name, params = _entry(fc)
        if name in MATH_FINAL_ANSWER and params.get("mode", "auto") != "choice":
            prose_checked.add(name)
        if name in IDEAL:
            fn = resolve_reward(name, params)
            checked.append((name, any_of_gold(fn), IDEAL[name], float(IDEAL[name].best(fn))))
        else:
            skipped.append(name)
    note = (f"; not checked (no gold answer to write): {', '.join(skipped)}" if skipped else "")
    if not head or not any(spec.answer is not None for _, _, spec, _ in checked):
        return [f"reward check: no reward with a gold answer{note}"] if skipped else []
    n = len(head)
    src = getattr(plan, "source", "data")
    # candidate answer texts of each row (a reward may read the answer its own way); a gold
    # answer that is prose is no answer a model could give
    cands: List[List[str]] = []
    no_final: List[int] = []
    for i, r in enumerate(head):
        texts: List[str] = []
        for name, _, spec, _ in checked:
            if spec.answer is not None:
                try:
                    t = spec.answer(r)
                except (KeyError, TypeError, ValueError):
                    t = None
                if name in prose_checked and t is not None and not is_final_answer(t):
                    if i not in no_final:
                        no_final.append(i)
                    continue
                if t is not None and str(t) not in texts:
                    texts.append(str(t))
        cands.append(texts or [""])
    if len(no_final) > max_unscorable * n + 1e-9:
        i = no_final[0]
        raise DataError(
            f"{src}: {len(no_final)} of the first {n} gold answers (field "
            f"'{_answer_path(plan)}') have no final answer a reward can compare, e.g. "
            f"{where(src, i + 1)}: '{_short(_final_answer(head[i]), 100)}'; give the final "
            f"answer alone (31, \\frac{{1}}{{2}}, B) or end a worked solution with '#### 31'")
    # every (format, row, candidate) completion in one batch per reward, in the formats the
    # prompt asks for
    formats = requested_formats(prompt)
    items = [(f, i, c) for f in formats for i in range(n)
             for c in range(len(cands[i]))]
    texts = [_write(ANSWER_FORMATS[f][1], _reasoning(head[i]), cands[i][c], opened_think)
             for f, i, c in items]
    columns = {k: [head[i].get(k) for _, i, _ in items] for k in head[0]}
    columns["completion_lengths"] = [0] * len(items)      # ideal: as short as it can be
    columns["finish_reasons"] = ["stop"] * len(items)
    at_max: Dict[str, List[bool]] = {}
    scores: Dict[str, List[Optional[float]]] = {}
    for name, fn, _, best in checked:
        try:
            got = list(fn(texts, **columns))
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{src}: reward '{name}' cannot read the rows ({e}); its fields "
                            f"are: {', '.join(map(str, head[0]))}") from None
        scores[name] = got
        at_max[name] = [s is not None and s >= best - 1e-9 for s in got]
    # the answer format: the one under which most rows earn every checked maximum
    best_item: Dict[Tuple[int, int], int] = {}
    for k, (f, i, _) in enumerate(items):
        hits = sum(at_max[name][k] for name, *_ in checked)
        if (f, i) not in best_item or hits > sum(at_max[nm][best_item[f, i]]
                                                   for nm, *_ in checked):
            best_item[f, i] = k
    totals = [sum(sum(at_max[nm][best_item[f, i]] for nm, *_ in checked) for i in range(n))
              for f in formats]
    f = formats[totals.index(max(totals))]
    chosen = [best_item[f, i] for i in range(n)]
    parts = []
    for name, _, spec, best in checked:
        ok = [at_max[name][k] for k in chosen]
        parts.append(f"{name} {sum(ok)}/{n}")
        if sum(ok) < (1.0 - max_unscorable) * n - 1e-9:
            i = ok.index(False)
            k = chosen[i]
            example = (f"e.g. {where(src, i + 1)}: '{_short(texts[k], 100)}' scores "
                       f"{scores[name][k]}")
            if spec.answer is None:
                opened = (" (the prompt already opens <think>, so a completion does not start "
                          "with it)" if opened_think else "")
                raise DataError(
                    f"{src}: format reward '{name}' earns its maximum {best:g} on only "
                    f"{sum(ok)} of the first {n} gold answers written as completions in the "
                    f"format the other rewards read ({ANSWER_FORMATS[f][0]}){opened}; "
                    f"{example}; check reward.functions and model.chat_template")
            field = spec.field or _answer_path(plan)
            raise DataError(
                f"{src}: reward '{name}' cannot pay a right answer on this data: the gold "
                f"answer (field '{field}') written as a completion ({ANSWER_FORMATS[f][0]}) "
                f"earns its maximum {best:g} on only {sum(ok)} of the first {n} rows "
                f"({example}); check reward.functions against the data")
    return [f"reward check: the gold answers written as completions "
            f"({ANSWER_FORMATS[f][0]}) earn the maximum of {', '.join(parts)} rows{note}"]


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
        tokenizer = load_tokenizer(cfg.model.path)
        if tokenizer is None:
            return f"(template '{template}' needs the model's tokenizer; shown once it loads)"
    try:
        return render_prompt(problem, template, tokenizer=tokenizer,
                             system_prompt=cfg.data.system_prompt)
    except ValueError as e:
        return f"(template '{template}': {e})"


class _FastTokenizer:
    """``tokenizer.json`` through the ``tokenizers`` library: the same ids as the model's fast
    tokenizer for a template that needs no chat template of its own, without importing
    transformers (and torch) before a stop."""

    def __init__(self, path: str):
        from tokenizers import Tokenizer  # noqa: PLC0415

        self._tok = Tokenizer.from_file(path)

    def encode(self, text: str, add_special_tokens: bool = False) -> List[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids


def _length_tokenizer(cfg):
    """What the preflight tokenizes prompts with: the ``tokenizers`` library when the template
    needs no tokenizer and the model has a ``tokenizer.json``, else :func:`_tokenizer`."""
    from mindrl.data.templates import TEMPLATES  # noqa: PLC0415

    path = cfg.model.path
    tj = os.path.join(path, "tokenizer.json") if path else ""
    if tj and os.path.isfile(tj) and not TEMPLATES.get(cfg.model.chat_template).needs_tokenizer:
        try:
            return _FastTokenizer(tj)
        except Exception:  # noqa: BLE001 - fall back to transformers
            pass
    return load_tokenizer(path, cfg.model.trust_remote_code)


def load_tokenizer(path: str, trust_remote_code: bool = False):
    """The model directory's tokenizer (loaded the way the backends load it), or None when
    ``path`` is not a local directory or holds no tokenizer."""
    if not path or not os.path.isdir(path):
        return None
    try:
        from transformers import AutoTokenizer  # noqa: PLC0415

        return AutoTokenizer.from_pretrained(path, local_files_only=True,
                                             trust_remote_code=trust_remote_code)
    except Exception:  # noqa: BLE001 - the checks that need it say they were skipped
        return None


# ----------------------------------------------------------------------------- prompt lengths
def prompt_ids(problem, cfg, tokenizer) -> List[int]:
    """The prompt's token ids as the trainer feeds them: ``problem`` rendered with
    ``model.chat_template`` and ``data.system_prompt``, encoded without added special tokens."""
    from mindrl.data.templates import render_prompt  # noqa: PLC0415

    text = render_prompt(problem, cfg.model.chat_template, tokenizer=tokenizer,
                         system_prompt=cfg.data.system_prompt)
    return tokenizer.encode(text, add_special_tokens=False)


def _length_summary(lengths: Sequence[int]) -> str:
    return f"longest {max(lengths)}, median {statistics.median(lengths):g} tokens"


def no_prompt_fits(limit: int, scanned: str, lengths: Sequence[int]) -> str:
    """The one line a run stops with when no prompt fits ``data.max_prompt_len``; ``scanned``
    says which prompts were looked at (``the first 64 rows``, ``a whole epoch (8 rows)``)."""
    return (f"data.max_prompt_len={limit}: no prompt of {scanned} fits "
            f"({_length_summary(lengths)} after the chat template); raise data.max_prompt_len "
            f"or use shorter prompts")


def check_prompt_lengths(rows: Sequence[Dict], cfg, tokenizer, job: str = "") -> List[str]:
    """Count the prompts of ``rows`` longer than ``data.max_prompt_len`` (the trainer skips
    them); raise :class:`DataError` (:func:`no_prompt_fits`) when none fits. Rows the run's
    memory plan encoded for ``job`` (:func:`mindrl.data.measured.measured`) are not encoded
    again."""
    from mindrl.data.measured import measured  # noqa: PLC0415

    rows = [r for r in rows if r.get("problem") is not None]
    if not rows:
        return []
    limit = cfg.data.max_prompt_len
    known = measured(job, cfg, rows)
    try:
        lengths = [n for n, _ in known] if known is not None else \
            [len(prompt_ids(r["problem"], cfg, tokenizer)) for r in rows]
    except ValueError as e:          # a template that cannot render this row: shown elsewhere
        return [f"prompt lengths: not checked ({e})"]
    long = sum(L > limit for L in lengths)
    if long == len(lengths):
        raise DataError(no_prompt_fits(limit, f"the first {len(rows)} rows", lengths))
    head = (f"warning: prompt lengths: {long} of the first {len(rows)} prompts are longer "
            f"than data.max_prompt_len={limit} and will be skipped" if long else
            f"prompt lengths: all of the first {len(rows)} prompts fit "
            f"data.max_prompt_len={limit}")
    return [f"{head} ({_length_summary(lengths)})"]


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


def check_batch_size(cfg, count: Optional[int], plan) -> List[str]:
    """A warning line when ``train.prompts_per_step`` exceeds the ``count`` rows of the data."""
    per_step = cfg.train.prompts_per_step
    if count is None or per_step <= count:
        return []
    src = getattr(plan, "source", None) or cfg.data.train_file
    return [f"warning: train.prompts_per_step={per_step} is more than the {count} rows of "
            f"{src}: every step repeats rows (each about {per_step / count:.3g} times)"]


def preflight(cfg, job: str, plan, rows: Sequence[Dict], check: bool = True,
              count: Optional[int] = None, show: bool = True) -> List[str]:
    """Show the first row as ``job`` will see it (logged on rank 0) and run the checks of the
    module docstring; returns the lines shown. ``count``: the data set's row count when
    ``rows`` holds only its first rows (default ``len(rows)``; None for a generator, with
    ``show=False``: only the checks' lines are logged, not the example)."""
    if not rows:
        raise DataError(f"{getattr(plan, 'source', 'data')}: no rows")
    tokenizer = None
    if cfg is not None and job in ("rl", "sft", "pref"):
        tokenizer = _length_tokenizer(cfg)
    main = is_main_process()

    def show_lines(new: List[str], level=logging.INFO) -> List[str]:
        if main:
            for line in new:
                if line.startswith("warning: "):
                    level = logging.WARNING
                log.log(level, "%s", line)
                if level >= logging.WARNING and line not in RUN_WARNINGS:
                    RUN_WARNINGS.append(line)     # repeated in the run summary
        return new

    lines: List[str] = []
    if show:
        count = len(rows) if count is None else count
        lines = show_lines(example_lines(rows[0], job, plan, cfg, tokenizer=tokenizer,
                                         count=count))
    d = cfg.data
    head = list(rows[:d.preflight_rows])
    if job in ("rl", "sft", "pref"):
        lines += show_lines(check_batch_size(cfg, count, plan), logging.WARNING)
    if check and job in ("rl", "sft", "pref"):
        if tokenizer is not None:
            lines += show_lines(check_prompt_lengths(head, cfg, tokenizer, job))
        else:
            lines += show_lines([f"prompt lengths: not checked before the model loads (no "
                                 f"tokenizer in '{cfg.model.path}')"])
    if check and job == "rl":
        check_rewards(rows, plan, cfg.reward.functions, d.preflight_rows,
                      d.preflight_max_unscorable)
        rendered = _rendered(rows[0]["problem"], cfg, tokenizer)
        lines += show_lines(check_ideal_completions(
            rows, plan, cfg.reward.functions, d.preflight_rows, d.preflight_max_unscorable,
            opened_think=rendered.rstrip().endswith("<think>"),
            prompt=f"{d.system_prompt}\n{rendered}"))
    return lines
