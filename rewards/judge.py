"""A generative judge: a causal LM reads the problem, the reference answer and a completion, and
its verdict becomes the reward (LLM-as-a-judge).

One call scores a batch of completions::

    prompt_i  = template with {problem}, {reference}, {completion} of item i
                (rendered with the judge tokenizer's chat template when it has one, ``chat``)
    output_i  = greedy decode of prompt_i by the judge (transformers `generate` or vLLM),
                ``batch_size`` prompts per engine call, at most ``max_new_tokens`` tokens
    score_i   = verdicts[pattern]       for the pattern whose match in output_i starts first
                                        (ties: the longest match), so "incorrect" is not read
                                        as "correct"
              | (x - lo) / (hi - lo)    with ``score_range: [lo, hi]``: x is the first number in
                                        output_i; outside [lo, hi] it is unparseable
              | None                    unparseable, or not finished within ``timeout``

``timeout`` is per item: each engine call is cut ``timeout`` seconds after it started (checked
after every generated token), and the items still decoding then score None as timeouts.
With ``rule`` set ("rule first") the rule reward scores every item first, in this process with
its own per-item limit (``rule_timeout``); the judge reads only the items the rule gave None
(an answer it cannot parse), and the score is the rule's where it has one, the judge's
elsewhere.

The judge runs where it is called: in the trainer process (the scoring pool calls model
rewards in process, between rollout and update: time-shared with the rollout engine), or in a
reward worker (the reward server and the framework plugins), which loads its own copy on first
use. Nothing heavy is imported before the first call; the instance pickles without its model.

Counters per call (``last_counts`` and :class:`ModelScores`): ``judged`` (items the judge
read), ``unparsed``, ``timeouts``, ``rule`` (items the rule scored).
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rewards.registry import REWARDS

logger = logging.getLogger(__name__)

__all__ = ["Judge", "ModelScores", "parse_verdict", "render_template", "DEFAULT_TEMPLATE",
           "DEFAULT_VERDICTS"]

DEFAULT_TEMPLATE = (
    "You grade a student's answer to a problem against the reference answer.\n"
    "Problem: {problem}\nReference answer: {reference}\nStudent's answer: {completion}\n"
    "Is the student's final answer equivalent to the reference? Reply with one word: "
    "correct or incorrect.")
DEFAULT_VERDICTS = {"incorrect": 0.0, "correct": 1.0}
PLACEHOLDERS = ("problem", "reference", "completion")
NUMBER = r"[-+]?\d+(?:\.\d+)?"


@dataclass
class ModelScores:
    """What a model reward returns to the scoring pool for N completions.

    scores:  N values, None = not scored (unparseable verdict, timed out)
    outputs: N judge outputs (raw text), None where the model did not read the item
    counts:  counters of this call (``judged``, ``unparsed``, ``timeouts``, ``rule``, ...)
    """

    scores: List[Optional[float]]
    outputs: List[Optional[str]] = field(default_factory=list)
    counts: Dict[str, int] = field(default_factory=dict)


def render_template(template: str, **values: Any) -> str:
    """``template`` with ``{problem}``, ``{reference}`` and ``{completion}`` replaced (in one
    pass: braces inside a completion are left as they are; no other field is read).

    >>> render_template("Q: {problem} A: {completion} {x}", problem="1+1", completion="{2}")
    'Q: 1+1 A: {2} {x}'
    """
    pattern = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
    return pattern.sub(lambda m: str(values.get(m.group(1), "")), template)


def parse_verdict(text: str, verdicts: Optional[Mapping[str, float]] = None,
                  score_range: Optional[Sequence[float]] = None,
                  number_pattern: str = NUMBER) -> Optional[float]:
    """The score of one judge output, None when it holds no verdict.

    >>> parse_verdict(" Incorrect.", {"incorrect": 0.0, "correct": 1.0})
    0.0
    >>> parse_verdict("score: 7/10", score_range=(0, 10))
    0.7
    >>> parse_verdict("I cannot tell", {"incorrect": 0.0, "correct": 1.0}) is None
    True
    """
    if score_range is not None:
        lo, hi = float(score_range[0]), float(score_range[1])
        m = re.search(number_pattern, text)
        if m is None:
            return None
        x = float(m.group(0))
        return (x - lo) / (hi - lo) if lo <= x <= hi else None
    best = None                                       # (start, -length, score)
    for pat, score in (verdicts or DEFAULT_VERDICTS).items():
        m = re.search(pat, text, flags=re.IGNORECASE)
        if m is not None:
            key = (m.start(), -(m.end() - m.start()), float(score))
            best = key if best is None or key[:2] < best[:2] else best
    return None if best is None else best[2]


def _rule_entry(rule: Any) -> Optional[Dict[str, Any]]:
    if rule in (None, "", {}):
        return None
    if isinstance(rule, str):
        return {"name": rule}
    if isinstance(rule, Mapping) and rule.get("name"):
        return {"name": rule["name"], "params": dict(rule.get("params") or {})}
    raise ValueError(f"judge: rule must be a reward name or {{name, params}}, got {rule!r}")


@REWARDS.register("judge")
class Judge:
    """A causal LM as a reward (see the module docstring for the formula).

    Args:
      model: a Hugging Face causal-LM directory, a run / checkpoint folder, or ``builtin:NAME``.
      template: the prompt; ``{problem}``, ``{reference}`` (optional) and ``{completion}``.
      verdicts: regular expression -> score (case-insensitive); default
        ``{"incorrect": 0, "correct": 1}``.
      score_range: ``[lo, hi]``: read the first number of the output instead, scored
        ``(x - lo) / (hi - lo)``; a number outside the range is unparseable.
      rule: a rule reward scored first (name, or ``{name, params}``); the judge reads only
        the items it left None.
      rule_timeout: per-item limit of the rule, seconds.
      engine: ``native`` (transformers, torch) or ``vllm``.
      device: torch device of the native engine (``cpu``, ``cuda``, ``cuda:1``, ``npu``);
        vLLM picks its own.
      dtype: ``float32``, ``bfloat16`` or ``float16``.
      batch_size: prompts per engine call.
      max_new_tokens: length of a verdict, in tokens.
      max_prompt_len: longest judge prompt in tokens; a longer completion keeps its end.
      timeout: per-item limit in seconds (each engine call is cut this long after it starts).
      chat: ``auto`` (the tokenizer's chat template when it has one), ``true`` or ``false``.
      system: system message for a chat template ('' = none).
      problem_column / reference_column: the columns read (the reference falls back to
        ``solution``; a list of accepted answers is joined with " or ").
      placement: ``colocated`` (in the scoring process, time-shared with the rollout engine)
        or ``actor`` (a Ray actor of its own, with ``actor_resources`` such as
        ``{num_gpus: 1}``).
    """

    batch_level = True          # the pool calls it once on the whole batch
    runs_in_process = True      # ... in the calling process (the model is loaded once there)

    def __init__(self, model: str, template: str = DEFAULT_TEMPLATE,
                 verdicts: Optional[Mapping[str, float]] = None,
                 score_range: Optional[Sequence[float]] = None, rule: Any = None,
                 rule_timeout: float = 5.0, engine: str = "native", device: str = "cpu",
                 dtype: str = "float32", batch_size: int = 16, max_new_tokens: int = 16,
                 max_prompt_len: int = 2048, timeout: float = 30.0, chat: Any = "auto",
                 system: str = "", problem_column: str = "problem",
                 reference_column: str = "answer", number_pattern: str = NUMBER,
                 gpu_memory_utilization: float = 0.3, placement: str = "colocated",
                 actor_resources: Optional[Mapping[str, Any]] = None):
        self._settings = {k: v for k, v in locals().items() if k != "self"}   # as given
        if not model:
            raise ValueError("judge: params.model is required (a model directory or builtin:NAME)")
        if "{completion}" not in template:
            raise ValueError("judge: params.template must contain {completion}")
        if engine not in ("native", "vllm"):
            raise ValueError(f"judge: params.engine='{engine}' is not one of native, vllm")
        if score_range is not None:
            if len(score_range) != 2 or not float(score_range[0]) < float(score_range[1]):
                raise ValueError(f"judge: params.score_range={list(score_range)} must be "
                                 "[lo, hi] with lo < hi")
            score_range = (float(score_range[0]), float(score_range[1]))
        verdicts = dict(verdicts or DEFAULT_VERDICTS)
        for pat in verdicts:
            try:
                re.compile(pat)
            except re.error as e:
                raise ValueError(f"judge: params.verdicts pattern '{pat}' is not a regular "
                                 f"expression: {e}") from None
        for name, v in (("batch_size", batch_size), ("max_new_tokens", max_new_tokens),
                        ("max_prompt_len", max_prompt_len)):
            if int(v) < 1:
                raise ValueError(f"judge: params.{name}={v} must be >= 1")
        if float(timeout) <= 0:
            raise ValueError(f"judge: params.timeout={timeout} must be > 0")
        if str(chat).lower() not in ("auto", "true", "false"):
            raise ValueError(f"judge: params.chat={chat!r} must be auto, true or false")
        if placement not in ("colocated", "actor"):
            raise ValueError(f"judge: params.placement='{placement}' is not one of colocated, "
                             "actor")
        self.model = str(model)
        self.template = template
        self.verdicts = verdicts
        self.score_range = score_range
        self.rule = _rule_entry(rule)
        self.rule_timeout = float(rule_timeout)
        self.engine = engine
        self.device = device
        self.dtype = dtype
        self.batch_size = int(batch_size)
        self.max_new_tokens = int(max_new_tokens)
        self.max_prompt_len = int(max_prompt_len)
        self.timeout = float(timeout)
        self.chat = str(chat).lower()
        self.system = system
        self.problem_column = problem_column
        self.reference_column = reference_column
        self.number_pattern = number_pattern
        self.gpu_memory_utilization = float(gpu_memory_utilization)
        self.placement = placement
        self.actor_resources = dict(actor_resources or {})
        self.last_counts: Dict[str, int] = {}
        self._runner = None
        self._rule_scorer = None

    def check(self) -> None:
        """Fail now, naming ``params.model``, when the judge's model directory is unusable
        (``builtin:`` models are built here)."""
        from mindrl.models.tiny import check_model_dir, resolve_model_path

        try:
            check_model_dir(resolve_model_path(self.model))
        except Exception as e:
            raise type(e)(f"judge: params.model={self.model}: {e}") from None

    # -- pickling: the model stays where it was loaded ------------------------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_runner"] = None
        state["_rule_scorer"] = None
        return state

    def settings(self) -> Dict[str, Any]:
        """The constructor's arguments, as given."""
        return dict(self._settings)

    def load(self) -> None:
        """Load the judge model now (a reward worker calls this before its first item)."""
        self._runner_()

    def close(self) -> None:
        """Free the judge model (and the rule's scorer); the next call loads it again."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self._rule_scorer is not None:
            self._rule_scorer.close()
            self._rule_scorer = None

    # -- the reward interface -------------------------------------------------------------
    def __call__(self, completions: Sequence[str], **columns) -> List[Optional[float]]:
        return self.score_batch(completions, **columns).scores

    def score_batch(self, completions: Sequence[str], **columns) -> ModelScores:
        """Scores, judge outputs and counters of ``completions`` (see the module docstring)."""
        n = len(completions)
        scores: List[Optional[float]] = [None] * n
        outputs: List[Optional[str]] = [None] * n
        counts = {"judged": 0, "unparsed": 0, "timeouts": 0, "rule": 0}
        todo = list(range(n))
        if self.rule is not None and n:
            ruled = self._rule_scores(completions, columns)
            todo = [i for i in range(n) if ruled[i] is None]
            for i in range(n):
                scores[i] = ruled[i]
            counts["rule"] = n - len(todo)
        if todo:
            prompts = [self._prompt_text(completions[i], columns, i) for i in todo]
            texts, finished = self._runner_().judge(prompts)
            for j, i in enumerate(todo):
                outputs[i] = texts[j]
                if not finished[j]:
                    counts["timeouts"] += 1
                    continue
                s = parse_verdict(texts[j], self.verdicts, self.score_range,
                                  self.number_pattern)
                if s is None:
                    counts["unparsed"] += 1
                scores[i] = s
            counts["judged"] = len(todo)
        if counts["timeouts"] or counts["unparsed"]:
            logger.info("judge: %d of %d judged items timed out, %d unparseable",
                        counts["timeouts"], counts["judged"], counts["unparsed"])
        self.last_counts = counts
        return ModelScores(scores, outputs, counts)

    # -- pieces ---------------------------------------------------------------------------
    def _rule_scores(self, completions, columns) -> List[Optional[float]]:
        if self._rule_scorer is None:
            from rewards.pool import RewardScorer

            self._rule_scorer = RewardScorer([self.rule], num_workers=0,
                                             timeout=self.rule_timeout)
        res = self._rule_scorer.score(list(completions), **columns)
        return next(iter(res.components.values()))

    def _reference(self, columns, i: int) -> str:
        for key in (self.reference_column, "solution"):
            col = columns.get(key)
            if col is not None:
                ref = col[i]
                if isinstance(ref, (list, tuple)):
                    return " or ".join(str(r) for r in ref)
                return "" if ref is None else str(ref)
        return ""

    def _prompt_text(self, completion: str, columns, i: int) -> str:
        problem = columns.get(self.problem_column)
        return self._fit(str(completion),
                         "" if problem is None else str(problem[i]), self._reference(columns, i))

    def _fit(self, completion: str, problem: str, reference: str) -> str:
        """The rendered prompt, the completion cut from its start (its end holds the answer)
        when the prompt is over ``max_prompt_len`` tokens."""
        runner = self._runner_()

        def render(c: str) -> str:
            return runner.render(render_template(self.template, problem=problem,
                                                 reference=reference, completion=c))

        text = render(completion)
        over = runner.length(text) - self.max_prompt_len
        if over <= 0:
            return text
        ids = runner.encode(completion)
        keep = len(ids) - over
        while keep > 0:                 # re-tokenising a cut text may merge differently
            text = render(runner.decode(ids[len(ids) - keep:]))
            if runner.length(text) <= self.max_prompt_len:
                return text
            keep -= 1
        raise ValueError(f"judge: params.max_prompt_len={self.max_prompt_len} tokens do not "
                         f"hold the prompt without its completion ({runner.length(render(''))} "
                         "tokens)")

    def _runner_(self):
        if self._runner is None:
            self._runner = _ActorRunner(self) if self.placement == "actor" else _Runner(self)
        return self._runner


class _Text:
    """The judge's tokenizer: prompts rendered, measured and cut where the scoring runs."""

    def __init__(self, judge: Judge):
        from transformers import AutoTokenizer

        from mindrl.models.tiny import check_model_dir, resolve_model_path

        self.j = judge
        self.path = resolve_model_path(judge.model)
        check_model_dir(self.path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        has_chat = bool(getattr(self.tokenizer, "chat_template", None))
        if judge.chat == "true" and not has_chat:
            raise ValueError(f"judge: params.chat=true but the tokenizer of {judge.model} has "
                             "no chat template")
        self.use_chat = has_chat if judge.chat == "auto" else judge.chat == "true"

    def render(self, user_text: str) -> str:
        if not self.use_chat:
            return user_text
        msgs = ([{"role": "system", "content": self.j.system}] if self.j.system else []) + \
            [{"role": "user", "content": user_text}]
        return self.tokenizer.apply_chat_template(msgs, tokenize=False,
                                                  add_generation_prompt=True)

    def encode(self, text: str) -> List[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def length(self, text: str) -> int:
        return len(self.encode(text))


class _ActorRunner(_Text):
    """``placement: actor``: the judge model lives in a Ray actor of its own (its resources
    from ``actor_resources``, e.g. ``{num_gpus: 1}``); prompts are rendered here and decoded
    there. Joins this process's Ray session, or starts a local one (shut down on close)."""

    def __init__(self, judge: Judge):
        super().__init__(judge)
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        import ray

        self.started = False
        if not ray.is_initialized():
            ray.init(address="local", include_dashboard=False, configure_logging=False,
                     log_to_driver=False, num_cpus=max(1, os.cpu_count() or 1))
            self.started = True
        inner = Judge(**{**judge.settings(), "placement": "colocated"})
        res = dict(judge.actor_resources)
        res.setdefault("num_cpus", 1)
        self.actor = ray.remote(**res)(_JudgeActor).remote(inner)
        ray.get(self.actor.ready.remote())          # the model is loaded before the first item

    def judge(self, prompts: List[str]):
        import ray

        return ray.get(self.actor.judge.remote(prompts))

    def close(self) -> None:
        import ray

        if self.actor is not None:
            ray.kill(self.actor)
            self.actor = None
        if self.started and ray.is_initialized():
            ray.shutdown()


class _JudgeActor:
    """The Ray actor behind ``placement: actor``: a colocated judge in its own process."""

    def __init__(self, judge: Judge):
        self.runner = _Runner(judge)

    def ready(self) -> bool:
        return True

    def judge(self, prompts: List[str]):
        return self.runner.judge(prompts)


class _Runner(_Text):
    """The judge model behind one engine: greedy decoding of a list of prompts with a deadline
    per engine call. Built on the first call."""

    def __init__(self, judge: Judge):
        super().__init__(judge)
        self.engine = self._vllm() if judge.engine == "vllm" else self._native()

    def _native(self):
        import torch
        from transformers import AutoModelForCausalLM, GenerationConfig

        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                 "float16": torch.float16}[self.j.dtype]
        model = AutoModelForCausalLM.from_pretrained(self.path, local_files_only=True,
                                                     dtype=dtype).to(self.j.device).eval()
        for p in model.parameters():
            p.requires_grad_(False)
        self.eos_ids = _stop_ids(self.tokenizer, getattr(model, "generation_config", None))
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])
        self.gen = GenerationConfig(do_sample=False, max_new_tokens=self.j.max_new_tokens,
                                    eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
                                    bos_token_id=None, use_cache=True, temperature=None,
                                    top_p=None, top_k=None)
        return model

    def _vllm(self):
        """An in-process ``vllm.LLM`` on the judge's directory (weights are never reloaded, so
        the CPU repacking issue of weight syncs does not arise)."""
        import os

        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        import vllm
        from transformers import AutoConfig, GenerationConfig

        try:
            gen = GenerationConfig.from_pretrained(self.path, local_files_only=True)
        except OSError:
            gen = None
        self.eos_ids = _stop_ids(self.tokenizer, gen)
        limit = getattr(AutoConfig.from_pretrained(self.path, local_files_only=True),
                        "max_position_embeddings", None) or 2 ** 20
        kwargs = dict(model=self.path, tokenizer=self.path, skip_tokenizer_init=True,
                      dtype=self.j.dtype, seed=0, max_model_len=min(
                          limit, self.j.max_prompt_len + self.j.max_new_tokens),
                      enable_prefix_caching=True,
                      gpu_memory_utilization=self.j.gpu_memory_utilization)
        if self.j.device == "cpu":
            kwargs.update(enforce_eager=True)
            if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
                kwargs.update(kv_cache_memory_bytes=2 ** 28)
        return vllm.LLM(**kwargs)

    # -- decoding -----------------------------------------------------------------------
    def judge(self, prompts: List[str]):
        """(output text per prompt, finished per prompt): greedy, ``batch_size`` at a time,
        each call cut ``timeout`` seconds after it starts."""
        texts: List[str] = []
        finished: List[bool] = []
        for s in range(0, len(prompts), self.j.batch_size):
            ids = [self.encode(p) for p in prompts[s:s + self.j.batch_size]]
            deadline = time.monotonic() + self.j.timeout
            if self.j.engine == "vllm":
                t, f = self._vllm_batch(ids, deadline)
            else:
                t, f = self._native_batch(ids, deadline)
            texts += t
            finished += f
        return texts, finished

    def _native_batch(self, ids, deadline):
        """transformers ``generate``, greedy, left-padded; a stopping criterion ends the call at
        the deadline: rows without their end token then (and not at ``max_new_tokens``) timed
        out."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        class _Deadline(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                late = time.monotonic() >= deadline
                return torch.full((input_ids.shape[0],), late, dtype=torch.bool,
                                  device=input_ids.device)

        P = max(len(p) for p in ids)
        x = torch.full((len(ids), P), self.pad_id, dtype=torch.long)
        att = torch.zeros((len(ids), P), dtype=torch.long)
        for i, p in enumerate(ids):
            x[i, P - len(p):] = torch.tensor(p, dtype=torch.long)
            att[i, P - len(p):] = 1
        dev = self.engine.device
        with torch.no_grad():
            out = self.engine.generate(input_ids=x.to(dev), attention_mask=att.to(dev),
                                       generation_config=self.gen,
                                       stopping_criteria=StoppingCriteriaList([_Deadline()]))
        eos = set(self.eos_ids)
        texts, done = [], []
        for row in out[:, P:].tolist():
            end = next((t for t, tok in enumerate(row) if tok in eos), None)
            ok = end is not None or len(row) >= self.j.max_new_tokens
            texts.append(self.tokenizer.decode(row[:end], skip_special_tokens=True))
            done.append(ok)
        return texts, done

    def _vllm_batch(self, ids, deadline):
        """vLLM's engine loop, one step at a time: requests still running at the deadline are
        aborted."""
        from vllm import SamplingParams as VSP

        core = self.engine.llm_engine
        params = VSP(n=1, temperature=0.0, max_tokens=self.j.max_new_tokens,
                     stop_token_ids=list(self.eos_ids), detokenize=False)
        base = f"judge-{time.monotonic_ns()}-"
        rids = [base + str(i) for i in range(len(ids))]
        for rid, p in zip(rids, ids):
            core.add_request(rid, {"prompt_token_ids": list(map(int, p))}, params)
        seen: Dict[str, List[int]] = {}             # tokens so far (cumulative outputs)
        done = set()
        while core.has_unfinished_requests():
            if time.monotonic() >= deadline:
                core.abort_request([r for r in rids if r not in done])
                break
            for o in core.step():
                seen[o.request_id] = list(o.outputs[0].token_ids)
                if o.finished:
                    done.add(o.request_id)
        texts = [self.tokenizer.decode(seen.get(r, []), skip_special_tokens=True) for r in rids]
        return texts, [r in done for r in rids]

    def close(self) -> None:
        engine, self.engine = getattr(self, "engine", None), None
        if engine is not None and self.j.engine == "vllm":
            try:
                engine.llm_engine.engine_core.shutdown()
            except Exception as e:  # noqa: BLE001 - best effort on teardown
                logger.debug("vLLM shutdown: %s", e)
        del engine
        import gc

        gc.collect()


def _stop_ids(tokenizer, generation_config=None) -> List[int]:
    """End-of-sequence ids of the judge: its generation config's and its tokenizer's."""
    ids: List[int] = []
    eos = getattr(generation_config, "eos_token_id", None) if generation_config else None
    for e in ([eos] if isinstance(eos, int) else list(eos or [])) + \
            [getattr(tokenizer, "eos_token_id", None)]:
        if e is not None and int(e) not in ids:
            ids.append(int(e))
    return ids
