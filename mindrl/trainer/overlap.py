"""Scoring off the critical path. ``reward.overlap_chunks``: generation of chunk k+1 runs in a
background thread while this thread scores chunk k. ``reward.overlap_groups``
(:func:`score_while_generating`): each group is scored in a background thread once it is
done, while generation goes on here.

Chunks are whole groups (prompts), so every group is scored with all of its n samples. The
rewards stay in the calling thread on purpose: an in-process scorer (``reward.num_workers=0``)
enforces its time limit with SIGALRM, which only the main thread receives; the engine is the
one that moves to a thread (torch and vLLM release the GIL inside their kernels, and a reward
pool's workers are other processes). The step waits for the slower of the two streams instead
of their sum: ~max(generation, scoring) + one chunk of the other.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, List, Sequence, Tuple, TypeVar

R = TypeVar("R")
S = TypeVar("S")


def chunk_bounds(count: int, chunks: int) -> List[Tuple[int, int]]:
    """``count`` items in ``chunks`` contiguous, near-equal, non-empty slices (start, stop)."""
    chunks = max(1, min(chunks, count))
    edges = [round(i * count / chunks) for i in range(chunks + 1)]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def pipelined(bounds: Sequence[Tuple[int, int]], generate: Callable[[int, int, int], R],
              score: Callable[[int, int, R], S]) -> Tuple[List[R], List[S], float, float]:
    """Run ``generate(chunk_index, start, stop)`` for every chunk in a background thread, in
    order, and ``score(start, stop, rollouts)`` here as each one arrives. Returns (rollouts,
    scores, generation seconds, scoring seconds not hidden behind generation). An exception on
    either side is raised here once the thread has stopped."""
    done: "queue.Queue" = queue.Queue()
    stop = threading.Event()
    t_start = time.perf_counter()

    def produce():
        try:
            for c, (a, b) in enumerate(bounds):
                if stop.is_set():
                    return
                done.put((a, b, generate(c, a, b), None))
        except BaseException as e:        # handed to the consumer, raised there
            done.put((None, None, None, e))
        finally:
            done.put(None)
            gen_end[0] = time.perf_counter()

    gen_end = [t_start]
    worker = threading.Thread(target=produce, name="mindrl-rollout", daemon=True)
    worker.start()
    rollouts: List[R] = []
    scores: List[S] = []
    try:
        while True:
            item = done.get()
            if item is None:
                break
            a, b, ro, err = item
            if err is not None:
                raise err
            rollouts.append(ro)
            scores.append(score(a, b, ro))
    finally:
        stop.set()
        worker.join()
    t_end = time.perf_counter()
    gen = gen_end[0] - t_start
    return rollouts, scores, gen, max(0.0, t_end - gen_end[0])


# --------------------------------------------------------------------------- finished groups
def reports_groups(engine) -> bool:
    """Whether ``engine.generate`` takes ``on_group_done`` (the native torch and MindSpore
    engines)."""
    import inspect

    try:
        return "on_group_done" in inspect.signature(engine.generate).parameters
    except (TypeError, ValueError):
        return False


def score_while_generating(trainer, rows, prompt_ids, attempt: int, sampling=None):
    """``reward.overlap_groups``: every group whose samples have all stopped goes to the reward
    pool (one background thread, so calls never overlap each other) while generation runs the
    rest; the groups still open at the end are scored together afterwards. Returns (rollouts,
    scores in row order, generation s, scoring s after generation ended).

    Two ways a group is known to be done: a native engine reports it from inside ``generate``
    (``on_group_done``, the torch and MindSpore samplers), or, with
    ``rollout.batch_invariant``, each group is its own ``generate`` call (any engine, tools
    too): it is scored while the next group samples. The samples are those of the run without
    overlap. The config refuses every other combination (``schema._check_honoured``); an engine
    that cannot report groups raises here rather than fall back to scoring afterwards.
    ``sampling`` replaces ``trainer.sampling(attempt)`` on the engine path (tests)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from mindrl.trainer.base import Scored, score_rollouts
    from mindrl.types import Rollouts

    n = trainer.cfg.rollout.n
    by_group = trainer.cfg.rollout.batch_invariant
    if not by_group and not reports_groups(trainer.engine):
        raise RuntimeError(f"reward.overlap_groups=true: the rollout engine "
                           f"{type(trainer.engine).__name__} cannot report finished groups; "
                           "set rollout.batch_invariant=true or reward.overlap_groups=false")
    tok = trainer.tokenizer
    early = {}
    pool = ThreadPoolExecutor(1, thread_name_prefix="mindrl-reward")

    def submit(g: int, part: Rollouts) -> None:
        early[g] = pool.submit(score_rollouts, trainer.scorer, [rows[g]], part)

    def done(g: int, responses) -> None:          # a native engine's report: ids only
        submit(g, Rollouts(prompt_ids=[prompt_ids[g]] * n, response_ids=responses,
                           logprobs=[np.zeros(len(r), np.float32) for r in responses],
                           finish_reasons=["stop"] * n, group_index=np.zeros(n, np.int64),
                           texts=tok.batch_decode(responses, skip_special_tokens=True)))

    try:
        t0 = time.perf_counter()
        if by_group:                              # one call per group, as without overlap
            parts = []
            for g in range(len(prompt_ids)):
                part = trainer.generate(prompt_ids[g:g + 1], attempt, first=g)
                parts.append(part)
                submit(g, part)
            ro = Rollouts.concat(parts)
        else:
            sp = sampling if sampling is not None else trainer.sampling(attempt)
            ro = trainer.engine.generate(prompt_ids, sp, on_group_done=done)
        t1 = time.perf_counter()
        groups = list(early)
        rest = [g for g in range(len(prompt_ids)) if g not in early]
        pieces = [early[g].result() for g in groups]
        if rest:
            idx = np.concatenate([np.arange(g * n, (g + 1) * n) for g in rest])
            part = ro.select(idx)
            part.group_index = np.repeat(np.arange(len(rest)), n)    # rows of [rows[g] ...]
            pieces.append(score_rollouts(trainer.scorer, [rows[g] for g in rest], part))
    finally:
        pool.shutdown(wait=True)
    order = groups + rest                         # the group of each piece's rows, in order
    pos = {g: k for k, g in enumerate(order)}
    perm = np.concatenate([np.arange(pos[g] * n, (pos[g] + 1) * n)
                           for g in range(len(prompt_ids))])
    sc = Scored.concat(pieces).select(perm)
    sc.metrics["overlapped_groups"] = float(len(groups))   # logged as reward/overlapped_groups
    return ro, sc, t1 - t0, time.perf_counter() - t1
