"""The multi-turn rollout loop: generate, stop at a tool call, run it, append its output, resume.

Token in, token out. A trajectory's response is a list of token ids built only by appending:
the ids the engine sampled (cut right after the first complete tool call: the tokens after it
were sampled against output the model imagined), then the ids of the rendered tool output
(``tokenizer.encode`` of that text alone), then the next turn's sampled ids, ... Generated text
is never decoded and re-encoded into the trajectory, so every trained token is one the engine
sampled, with the engine's own log-prob. Each row carries a loss mask (1 = sampled, 0 = tool
output); tool tokens get rollout log-prob 0 and the trainer multiplies its response mask by
this mask, so they weigh nothing in the loss, the advantages, the KL and the token counts.

Budgets: ``rollout.max_new_tokens`` bounds the whole response (all turns plus tool outputs, so
every padded shape the trainer builds stays within it); ``rollout.max_turns`` bounds the model
turns (at most ``max_turns - 1`` calls are run; a call in the last turn is left as text);
``tools.max_output_tokens`` caps one tool output (the text is cut and marked).

Works with any engine of :mod:`mindrl.rollout.base` (each later turn is one more
``generate`` call on the exact prefix ids, ``n=1``; vLLM's prefix cache reuses the prefix).
Calls of all rows of a turn run at once on the sandbox pool.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Dict, List, Sequence

import numpy as np

from mindrl.tools.formats import find_call, render_output
from mindrl.tools.registry import ToolExecutor, ToolOutput
from mindrl.types import Rollouts, SamplingParams

log = logging.getLogger("mindrl.tools")


@dataclass
class _Row:
    prompt: List[int]
    ids: List[int] = field(default_factory=list)
    logp: List[float] = field(default_factory=list)
    mask: List[float] = field(default_factory=list)
    finish: str = ""
    turns: int = 0
    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    tool_tokens: int = 0

    def add(self, ids, logp, trained: bool) -> None:
        self.ids += list(ids)
        self.logp += list(logp) if trained else [0.0] * len(ids)
        self.mask += [1.0 if trained else 0.0] * len(ids)


def cut_after_call(tokenizer, ids: Sequence[int], fmt: str, eos: Sequence[int]):
    """(k, call): the shortest prefix ``ids[:k]`` whose text holds a complete call (plus the
    EOS token right after it in the chat format, which ends the assistant turn), or None."""
    decode = lambda k: tokenizer.decode(list(ids[:k]), skip_special_tokens=False)  # noqa: E731
    found = find_call(decode(len(ids)), fmt)
    if found is None:
        return None
    lo, hi = 1, len(ids)                     # smallest k with a complete call in decode(k)
    while lo < hi:
        mid = (lo + hi) // 2
        if find_call(decode(mid), fmt) is not None:
            hi = mid
        else:
            lo = mid + 1
    call = find_call(decode(lo), fmt)[1]
    k = lo
    if fmt == "chat" and k < len(ids) and ids[k] in eos:
        k += 1
    return k, call


class ToolRollout:
    """Multi-turn generation with tools over one engine (see the module docstring)."""

    def __init__(self, tokenizer, executor: ToolExecutor, fmt: str = "tir", max_turns: int = 4,
                 max_output_tokens: int = 256, stop_token_ids: Sequence[int] = ()):
        self.tok = tokenizer
        self.executor = executor
        self.fmt = fmt
        self.max_turns = max_turns
        self.max_output_tokens = max_output_tokens
        eos = getattr(tokenizer, "eos_token_id", None)
        eos = [eos] if eos is not None else []
        self.eos = set(int(e) for e in list(stop_token_ids) + eos)
        self.last_metrics: Dict[str, float] = {}
        self.last_counts: Dict[str, float] = {}

    # ------------------------------------------------------------------ tool output ids
    def output_ids(self, out: ToolOutput, after_eos: bool, room: int) -> List[int]:
        """Ids of the rendered output, its text cut to ``max_output_tokens`` tokens."""
        text = out.text
        body = self.tok.encode(text, add_special_tokens=False)
        if len(body) > self.max_output_tokens or out.truncated:
            text = self.tok.decode(body[:self.max_output_tokens]) + "\n... (output truncated)"
        ids = self.tok.encode(render_output(text, self.fmt, after_eos), add_special_tokens=False)
        return ids[:room]

    # ------------------------------------------------------------------ the loop
    def generate(self, engine, prompt_ids: List[List[int]], sampling: SamplingParams
                 ) -> Rollouts:
        n, budget = sampling.n, sampling.max_new_tokens
        rows = [_Row(list(p)) for p in prompt_ids for _ in range(n)]
        active = list(range(len(rows)))
        for turn in range(self.max_turns):
            if not active:
                break
            if turn == 0:
                ro = engine.generate(prompt_ids, sampling)
            else:
                left = max(budget - len(rows[i].ids) for i in active)
                seed = None if sampling.seed is None else sampling.seed + 7919 * turn
                sp = dataclasses.replace(sampling, n=1, max_new_tokens=left, seed=seed)
                ro = engine.generate([rows[i].prompt + rows[i].ids for i in active], sp)
            pending = []
            for j, i in enumerate(active):
                r = rows[i]
                r.turns += 1
                gen, lp = list(ro.response_ids[j]), np.asarray(ro.logprobs[j]).tolist()
                room = budget - len(r.ids)
                cut = cut_after_call(self.tok, gen, self.fmt, self.eos) \
                    if turn + 1 < self.max_turns else None
                if cut is not None and cut[0] <= room:
                    k, call = cut
                    r.add(gen[:k], lp[:k], trained=True)
                    r.calls += 1
                    pending.append((i, self.executor.submit(call)))
                    continue
                r.add(gen[:room], lp[:room], trained=True)
                r.finish = "length" if len(gen) > room else ro.finish_reasons[j]
            still = []
            for i, fut in pending:
                r, out = rows[i], fut.result()
                r.errors += out.verdict != "ok"
                r.timeouts += out.verdict == "timeout"
                room = budget - len(r.ids)
                ids = self.output_ids(out, bool(r.ids) and r.ids[-1] in self.eos, room)
                r.add(ids, [], trained=False)
                r.tool_tokens += len(ids)
                if len(r.ids) >= budget:
                    r.finish = "length"
                else:
                    still.append(i)
            active = still
        for i in active:                  # ran out of turns right after a tool output
            rows[i].finish = rows[i].finish or "length"
        self.last_counts = tool_counts(rows)
        self.last_metrics = tool_metrics(self.last_counts)
        return Rollouts(
            prompt_ids=[r.prompt for r in rows], response_ids=[r.ids for r in rows],
            logprobs=[np.asarray(r.logp, np.float32) for r in rows],
            finish_reasons=[r.finish for r in rows],
            group_index=np.repeat(np.arange(len(prompt_ids)), n),
            texts=self.tok.batch_decode([r.ids for r in rows], skip_special_tokens=True),
            loss_masks=[np.asarray(r.mask, np.float32) for r in rows])


COUNT_KEYS = ("samples", "calls", "samples_with_calls", "errors", "timeouts", "turns",
              "tool_tokens", "tokens")


def tool_counts(rows: List[_Row]) -> Dict[str, float]:
    """The additive counts behind the tool metrics (sums over rows; ``turns_max`` a max), so
    that parts of a step and data-parallel ranks combine exactly (:func:`reduce_counts`)."""
    out = {"samples": float(len(rows)), "calls": float(sum(r.calls for r in rows)),
           "samples_with_calls": float(sum(r.calls > 0 for r in rows)),
           "errors": float(sum(r.errors for r in rows)),
           "timeouts": float(sum(r.timeouts for r in rows)),
           "turns": float(sum(r.turns for r in rows)),
           "tool_tokens": float(sum(r.tool_tokens for r in rows)),
           "tokens": float(sum(len(r.ids) for r in rows))}
    out["turns_max"] = float(max((r.turns for r in rows), default=0))
    return out


def tool_metrics(c: Dict[str, float]) -> Dict[str, float]:
    """The logged ``tools/*`` metrics of (summed) counts: per-sample means, error fraction of
    the calls, output tokens as a fraction of all response tokens; errors and timeouts as
    counts."""
    n = max(c["samples"], 1.0)
    return {"tools/calls_per_sample": c["calls"] / n,
            "tools/samples_with_calls": c["samples_with_calls"] / n,
            "tools/errors": float(c["errors"]),
            "tools/error_fraction": c["errors"] / max(c["calls"], 1.0),
            "tools/timeouts": float(c["timeouts"]),
            "tools/turns_mean": c["turns"] / n,
            "tools/turns_max": float(c["turns_max"]),
            "tools/output_token_fraction": c["tool_tokens"] / max(c["tokens"], 1.0)}


def reduce_counts(parts: Sequence[Dict[str, float]], allsum=None, allmax=None
                  ) -> Dict[str, float]:
    """Sum of count dicts (``turns_max``: the max); ``allsum`` / ``allmax`` then combine the
    result over data-parallel ranks (a trainer's :meth:`allsum` and an element-wise max)."""
    vec = np.array([sum(p[k] for p in parts) for k in COUNT_KEYS], np.float64)
    top = np.array([max((p["turns_max"] for p in parts), default=0.0)], np.float64)
    if allsum is not None:
        vec = np.asarray(allsum(vec), np.float64)
    if allmax is not None:
        top = np.asarray(allmax(top), np.float64)
    out = dict(zip(COUNT_KEYS, vec.tolist()))
    out["turns_max"] = float(np.max(top))
    return out


def _rank_reducers(trainer):
    """(allsum, allmax) over the trainer's data-parallel ranks."""
    return trainer.allsum, lambda x: np.max(trainer.gather(np.asarray(x, np.float64)))


def apply_loss_masks(response_mask: np.ndarray, ro: Rollouts) -> np.ndarray:
    """Multiply the padded (B, T) response mask by each row's tool mask, in place."""
    for i, m in enumerate(getattr(ro, "loss_masks", None) or []):
        response_mask[i, :len(m)] *= m
    return response_mask


def make_tool_rollout(tokenizer, names: Sequence[str], *, fmt: str = "tir", max_turns: int = 4,
                      max_output_tokens: int = 256, workers: int = 4, isolation: str = "auto",
                      allow_unisolated: bool = False, timeout_s: float = 10.0,
                      memory_mb: int = 1024, output_bytes: int = 16384, max_procs: int = 16,
                      hide_paths: Sequence[str] = (), stop_token_ids: Sequence[int] = (),
                      python: str = "") -> ToolRollout:
    """The loop with its tools and (when a tool needs one) its sandbox pool. Refuses to run
    model code without isolation unless ``allow_unisolated``; prints the startup line saying
    which isolation is active."""
    from mindrl.errors import ConfigError
    from mindrl.tools.registry import build_tools
    from mindrl.tools.sandbox import Sandbox, SandboxLimits, SandboxPool, describe

    tools = build_tools(names)
    pool = None
    if any(x.sandboxed for x in tools):
        limits = SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb,
                               output_bytes=output_bytes, max_procs=max_procs)
        sandbox = Sandbox(limits, isolation=isolation, hide_paths=[h for h in hide_paths if h],
                          python=python or None)
        line = describe(sandbox.isolation, sandbox.drop_uid)
        if sandbox.isolation == "none" and not allow_unisolated:
            raise ConfigError("tool RL runs model-written code, and no isolation is available "
                              "(tools.sandbox.isolation resolved to none): install bubblewrap, "
                              "or opt out with tools.sandbox.allow_unisolated=true")
        (log.warning if sandbox.isolation == "none" else log.info)(line)
        print(line, flush=True)
        pool = SandboxPool(sandbox, workers=workers)
    executor = ToolExecutor(tools, pool, workers=workers)
    return ToolRollout(tokenizer, executor, fmt=fmt, max_turns=max_turns,
                       max_output_tokens=max_output_tokens, stop_token_ids=stop_token_ids)


def build_tool_rollout(cfg, tokenizer, stop_token_ids=()) -> ToolRollout:
    """The loop for a run config (``tools.*``, ``rollout.max_turns``). The sandbox hides the
    run directory (checkpoints, metrics) and the data with its gold answers."""
    import os

    from mindrl.paths import data_root

    t, s = cfg.tools, cfg.tools.sandbox
    hidden = [cfg.logging.output_dir, str(data_root(cfg.data.data_dir))] + [
        os.path.dirname(os.path.abspath(f)) for f in (cfg.data.train_file, cfg.data.val_file)
        if f and os.path.exists(f)] + list(s.hide_paths)
    return make_tool_rollout(
        tokenizer, t.names, fmt=t.format, max_turns=cfg.rollout.max_turns,
        max_output_tokens=t.max_output_tokens, workers=t.workers, isolation=s.isolation,
        allow_unisolated=s.allow_unisolated, timeout_s=s.timeout_s, memory_mb=s.memory_mb,
        output_bytes=s.output_bytes, max_procs=s.max_procs, hide_paths=hidden,
        stop_token_ids=stop_token_ids)


def trainer_sampler(trainer, record: bool = True):
    """``generate(prompt_ids, sampling)`` for the trainer: the loop is built once per run (its
    sandbox pool lives as long as the trainer); ``record``: keep the counts for the step's
    metrics (validation keeps its own, ``trainer._tool_val_parts``)."""
    loop = getattr(trainer, "_tool_rollout", None)
    if loop is None:
        loop = build_tool_rollout(trainer.cfg, trainer.tokenizer, trainer.stop_ids)
        trainer._tool_rollout = loop
        trainer._tool_metric_parts = []
    if not record:
        trainer._tool_val_parts = []

    def sample(prompt_ids, sampling):
        ro = loop.generate(trainer.engine, prompt_ids, sampling)
        (trainer._tool_metric_parts if record else trainer._tool_val_parts).append(
            dict(loop.last_counts))
        return ro

    return sample


def pop_tool_metrics(trainer, validation: bool = False) -> Dict[str, float]:
    """The step's tool metrics over all data-parallel ranks (every rank must call it: it
    all-reduces), then forget them; ``validation``: those of the last validation pass."""
    name = "_tool_val_parts" if validation else "_tool_metric_parts"
    parts = getattr(trainer, name, [])
    setattr(trainer, name, [])
    if not parts:
        return {}
    return tool_metrics(reduce_counts(parts, *_rank_reducers(trainer)))
