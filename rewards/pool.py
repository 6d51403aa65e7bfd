"""The scoring pool: reward components computed in worker processes with a hard time limit.

``RewardScorer(functions, num_workers, timeout, none_as)`` scores a batch of completions with
several reward components and returns every component per item, the weighted sum and counters:

    total_i = sum_k w_k * (r_k,i if r_k,i is not None else none_as)

How it stays alive:
  - Item-level rewards are split into single items and sent to workers in chunks. A worker
    reports each item as it finishes, so the parent knows which item it is on and since when.
  - An item that runs past ``timeout`` seconds has its worker killed (SIGKILL, from outside:
    no signals or threads inside the worker are trusted) and replaced; the item scores None and
    counts as a timeout; the rest of the chunk goes back to the queue. A worker that dies
    (segfault, ``os._exit``, out of memory) is replaced the same way and its item counts as an
    error. An exception inside a reward scores None and counts as an error. Each such event is
    logged once with the component name and the item index.
  - Batch-level rewards (``batch_level = True``, e.g. Kimi's ``length``) run on the whole batch
    in one worker call, limited to ``batch_timeout`` (default ``timeout * batch size``).
  - Works from any thread: the limit is enforced by the parent's clock, never by SIGALRM.
  - Model rewards (``runs_in_process = True``: the judge, the reward model) are called in the
    calling process, once on the whole batch, after the other components: their model is
    loaded once there and shares the device with the rollout engine in turn. They keep their
    own per-item limit and report their timeouts, their outputs (saved with the rollouts) and
    counters (``reward/<key>/<counter>``) through ``score_batch`` (:mod:`rewards.judge`).
  - ``num_workers=0`` scores in the calling process, item by item, and keeps ``timeout``: a
    real-time timer (SIGALRM) armed per item raises inside the reward once the item is past its
    limit; the item scores None and counts as a timeout. Python code, sleeps and math-verify
    are cut on time; a C call that never checks for signals (one rare in rewards) is cut only
    when it returns, which workers do not wait for. Python delivers signals to the main thread
    only: called from any other thread (or where there is no SIGALRM), ``num_workers=0``
    scores in one worker process instead, and says so once. Scores do not depend on the
    worker count.

Workers start from a ``forkserver`` (default on Linux; ``fork`` and ``spawn`` also work), so a
replacement costs milliseconds and never copies a trainer's threads or accelerator state.
``close()`` (or the context manager) stops and reaps every worker.
"""

from __future__ import annotations

import logging
import math
import multiprocessing as mp
import os
import signal
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence

import numpy as np

from rewards.registry import any_of_gold, is_batch_level, resolve_reward

logger = logging.getLogger(__name__)

__all__ = ["RewardComponent", "RewardResult", "RewardScorer"]

_PRELOAD = ["rewards.math_grader", "rewards.registry", "rewards.open_r1",
            "rewards.knights_knaves", "rewards.countdown", "rewards.gsm8k"]


@dataclass
class RewardComponent:
    """One configured reward: ``key`` is unique within a scorer (``cosine``, ``cosine_1``)."""

    key: str
    fn: Callable
    weight: float = 1.0
    batch_level: bool = False
    in_process: bool = False    # a model reward: called in the scoring process, whole batch


@dataclass
class RewardResult:
    """Scores of one batch of N completions.

    components: key -> N scores (None = not scorable, timed out or failed)
    total:      (N,) float64 weighted sum, None counted as ``none_as``
    num_none / num_timeouts / num_errors: key -> count (timeouts and errors are also None)
    outputs: key -> N texts a model reward produced (None where it read nothing)
    counts:  key -> counters a model reward reported (``unparsed``, ``judged``, ...)
    """

    components: Dict[str, List[Optional[float]]]
    total: np.ndarray
    weights: Dict[str, float]
    num_none: Dict[str, int] = field(default_factory=dict)
    num_timeouts: Dict[str, int] = field(default_factory=dict)
    num_errors: Dict[str, int] = field(default_factory=dict)
    outputs: Dict[str, List[Optional[str]]] = field(default_factory=dict)
    counts: Dict[str, Dict[str, int]] = field(default_factory=dict)

    def array(self, key: str) -> np.ndarray:
        """(N,) float64 scores of one component, NaN where None."""
        return np.array([np.nan if v is None else v for v in self.components[key]],
                        dtype=np.float64)

    def metrics(self) -> Dict[str, float]:
        """Flat metrics for logging: per-component mean (over scored items) and None count,
        the total's mean, and ``reward/timeouts`` / ``reward/errors`` over all components."""
        out: Dict[str, float] = {}
        for key in self.components:
            arr = self.array(key)
            scored = arr[~np.isnan(arr)]
            out[f"reward/{key}/mean"] = float(scored.mean()) if scored.size else float("nan")
            out[f"reward/{key}/none"] = float(self.num_none.get(key, 0))
            for name, v in self.counts.get(key, {}).items():
                out[f"reward/{key}/{name}"] = float(v)
        out["reward/total/mean"] = float(self.total.mean()) if self.total.size else float("nan")
        out["reward/timeouts"] = float(sum(self.num_timeouts.values()))
        out["reward/errors"] = float(sum(self.num_errors.values()))
        return out


def _field(cfg: Any, name: str, default: Any = None) -> Any:
    if isinstance(cfg, Mapping):
        return cfg.get(name, default)
    return getattr(cfg, name, default)


def build_components(functions: Sequence[Any]) -> List[RewardComponent]:
    """Resolve config entries (objects or dicts with ``name``, ``weight``, ``params``, or
    ready callables) into components with unique keys."""
    comps: List[RewardComponent] = []
    seen: Dict[str, int] = {}
    for cfg in functions:
        if callable(cfg) and not isinstance(cfg, Mapping):
            name = getattr(cfg, "__name__", type(cfg).__name__)
            fn, weight = cfg, 1.0
        else:
            name = _field(cfg, "name")
            if not name:
                raise ValueError(f"reward entry without a name: {cfg!r}")
            weight = float(_field(cfg, "weight", 1.0))
            fn = any_of_gold(resolve_reward(name, _field(cfg, "params", None) or {}))
        base = str(name).split(":")[-1].split(".")[-1] if (":" in name or "." in name) else name
        key = base if base not in seen else f"{base}_{seen[base]}"
        seen[base] = seen.get(base, 0) + 1
        comps.append(RewardComponent(key, fn, weight, is_batch_level(fn),
                                     bool(getattr(fn, "runs_in_process", False))))
    if not comps:
        raise ValueError("at least one reward function is required")
    return comps


# ------------------------------------------------------------------------------- worker side


def _run_task(fns: Sequence[Callable], comp: int, completions, columns) -> List[Optional[float]]:
    out = fns[comp](completions, **columns)
    out = list(out)
    if len(out) != len(completions):
        raise ValueError(f"reward returned {len(out)} scores for {len(completions)} completions")
    return [None if v is None else float(v) for v in out]


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when the process that started it ends
    (``prctl(PR_SET_PDEATHSIG)``), so a worker never outlives its forkserver or pool, whatever
    killed them; exits now if that parent is already gone. Elsewhere: nothing."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)          # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent == 1 or os.getppid() != parent:          # orphaned before the call took effect
        os._exit(1)


def _release_forkserver() -> None:
    """In a forkserver's child: close this process's copy of the forkserver's keep-alive pipe.
    multiprocessing hands every child that pipe's write end, so that the child could start
    processes itself; but the forkserver exits only once every write end is closed, so while
    a worker lives, a dead service's forkserver would live on, and with it (it is their
    parent) every worker. Workers start no processes: closed, the forkserver ends with the
    service and the workers with the forkserver (:func:`die_with_parent`)."""
    try:
        from multiprocessing import forkserver

        fs = forkserver._forkserver
        fd = fs._forkserver_alive_fd
    except (ImportError, AttributeError):
        return
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
        fs._forkserver_alive_fd = None


def _worker_main(conn, fns: Sequence[Callable], forked_by_server: bool = False) -> None:
    """Worker loop: receive a chunk of tasks, send one result per task as soon as it is done.
    ``forked_by_server``: started by a forkserver, which forks from its one thread, so the
    worker can die with it (with fork / spawn the parent-death signal would follow the thread
    that started the worker, not the process). Model rewards (a ``load`` method) load their
    model first, before the first message is read, so the load is never charged to an item's
    time limit."""
    if forked_by_server:
        die_with_parent()
        _release_forkserver()
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for fn in fns:
        load = getattr(fn, "load", None) if fn is not None else None
        if callable(load):
            load()
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        for task_id, comp, completions, columns in chunk:
            try:
                res = ("ok", _run_task(fns, comp, completions, columns))
            except Exception as e:  # noqa: BLE001 - any reward failure is one scored None
                res = ("error", f"{type(e).__name__}: {str(e)[:300]}")
            try:
                conn.send((task_id, *res))
            except (EOFError, OSError, BrokenPipeError):
                return


# ------------------------------------------------------------------------------- in-process


class _InlineTimeout(BaseException):
    """Raised inside a reward scored in-process once its item is past the limit. A
    BaseException, so a reward's own ``except Exception`` does not swallow it."""


def _inline_limit_works() -> bool:
    """An in-process limit needs SIGALRM delivered to this thread: the main thread on Unix."""
    return (threading.current_thread() is threading.main_thread()
            and hasattr(signal, "SIGALRM") and hasattr(signal, "setitimer"))


class _ItemTimer:
    """Wall-clock limit for items scored in the main thread (context manager around a batch).

    ``start(limit)`` arms the process's real-time timer (``setitimer``, SIGALRM) for the item
    and ``stop()`` disarms it: two system calls per item. When it fires, the handler raises
    :class:`_InlineTimeout` in the reward; the timer then fires again every ``RESEND`` seconds
    until the item ends (the reward may have caught the first one). A kernel timer, not a
    watchdog thread: it also interrupts a C call that holds the GIL but checks for signals
    (Python's big-integer power, which ``9^{9^{9^9}}`` reaches).

    math-verify arms its own limit with ``signal.alarm(n)`` and disarms it with ``alarm(0)``,
    which would replace ours; while the timer is in use ``signal.alarm`` is wrapped so that
    ``alarm(n)`` arms at most the item's remaining time (math-verify's handler then raises its
    own timeout, our deadline holds) and ``alarm(0)`` puts our timer back. On exit the previous
    SIGALRM handler, ``signal.alarm`` and any alarm that was pending (less the time spent) are
    restored.
    """

    RESEND = 0.05

    def __init__(self):
        self._deadline: Optional[float] = None   # monotonic deadline of the running item

    def __enter__(self) -> "_ItemTimer":
        self._t0 = time.monotonic()
        self._prev_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        self._prev_timer = signal.setitimer(signal.ITIMER_REAL, 0)
        self._real_alarm = signal.alarm
        signal.alarm = self._alarm
        return self

    def __exit__(self, *exc) -> None:
        self._deadline = None
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.alarm = self._real_alarm
        signal.signal(signal.SIGALRM, self._prev_handler)
        left, interval = self._prev_timer
        if left > 0:                    # an alarm the caller had set: keep it running
            spent = time.monotonic() - self._t0
            signal.setitimer(signal.ITIMER_REAL, max(left - spent, 1e-3), interval)

    def _arm(self, seconds: float) -> None:
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-4), self.RESEND)

    def start(self, limit: float) -> None:
        self._deadline = time.monotonic() + limit
        self._arm(limit)

    def stop(self) -> bool:
        """Disarm; True if the item ran past its limit."""
        signal.setitimer(signal.ITIMER_REAL, 0)
        late = self._deadline is not None and time.monotonic() >= self._deadline
        self._deadline = None
        return late

    def _alarm(self, seconds: int) -> int:
        """``signal.alarm`` while an item runs: never later than the item's deadline."""
        if self._deadline is None:
            return self._real_alarm(seconds)
        left = self._deadline - time.monotonic()
        before = signal.getitimer(signal.ITIMER_REAL)[0]
        if seconds <= 0:
            self._arm(left)             # their limit is over: ours again
        elif seconds < left:            # theirs comes first: one shot, as alarm() is
            signal.setitimer(signal.ITIMER_REAL, seconds)
        else:
            self._arm(left)
        return int(math.ceil(before))

    def _on_alarm(self, signum, frame) -> None:
        if self._deadline is not None and time.monotonic() >= self._deadline - 1e-3:
            raise _InlineTimeout()
        prev = self._prev_handler       # not ours (between items): the caller's handler
        if callable(prev):
            prev(signum, frame)


# ------------------------------------------------------------------------------- parent side


@dataclass
class _Task:
    task_id: int
    comp: int
    items: List[int]  # item indices (one for item-level, all for batch-level)
    limit: float


class _Worker:
    def __init__(self, ctx, fns):
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main,
                                args=(child_conn, fns, ctx.get_start_method() == "forkserver"),
                                daemon=True)
        self.proc.start()
        child_conn.close()
        self.conn = parent_conn
        self.chunk: Deque[_Task] = deque()
        self.started = 0.0  # when the current task (chunk[0]) began

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError, ValueError):
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        try:
            self.conn.close()
        except OSError:
            pass


def _shutdown(workers: List[_Worker]) -> None:
    for w in workers:
        w.stop()
    workers.clear()


class RewardScorer:
    """Score batches with weighted reward components in worker processes.

    Args:
      functions: config entries with ``name`` (registered name or import path), ``weight``,
        ``params`` (objects such as ``RewardFunctionConfig`` or dicts), or plain callables.
      num_workers: worker processes; None = ``os.cpu_count()``; 0 = score in this process
        (from the main thread; from any other thread: in one worker process, see above).
      timeout: limit in seconds for one item of one item-level component, in every mode.
      none_as: value a None score contributes to ``total``.
      batch_timeout: limit for one batch-level call; None = ``timeout * batch size``.
      start_method: ``forkserver`` (default where available), ``fork`` or ``spawn``.
      chunk_size: items per message to a worker; None = batch / (4 * workers), at most 16.

    >>> with RewardScorer([{"name": "format", "weight": 0.5}], num_workers=0) as scorer:
    ...     scorer(["<think>\\nx\\n</think>\\n<answer>\\n1\\n</answer>", "1"]).total.tolist()
    [0.5, 0.0]
    """

    def __init__(self, functions: Sequence[Any], num_workers: Optional[int] = None,
                 timeout: float = 5.0, none_as: float = 0.0,
                 batch_timeout: Optional[float] = None, start_method: Optional[str] = None,
                 chunk_size: Optional[int] = None):
        self.components = build_components(functions)
        for comp in self.components:        # a model reward's files: checked before any step
            if comp.in_process and hasattr(comp.fn, "check"):
                comp.fn.check()
        self.num_workers = (os.cpu_count() or 1) if num_workers is None else int(num_workers)
        if self.num_workers < 0:
            raise ValueError("num_workers must be >= 0")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = float(timeout)
        self.none_as = float(none_as)
        self.batch_timeout = batch_timeout
        self.chunk_size = chunk_size
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        self.start_method = start_method
        self._ctx = None
        self._workers: List[_Worker] = []
        self._finalizer = weakref.finalize(self, _shutdown, self._workers)
        self._closed = False
        self._said_thread = False
        self.restarts = 0  # workers replaced after a timeout or crash, over the scorer's life

    # -- lifecycle -----------------------------------------------------------------------
    def _fns(self) -> List[Callable]:
        """The components' callables for workers and inline scoring; model rewards run in
        this process only (:meth:`_score_model`), so workers get None in their place."""
        return [None if c.in_process else c.fn for c in self.components]

    def _start(self) -> None:
        if self._ctx is None:
            self._ctx = mp.get_context(self.start_method)
            if self.start_method == "forkserver":
                self._ctx.set_forkserver_preload(_PRELOAD)
        while len(self._workers) < self._pool_size:
            self._workers.append(_Worker(self._ctx, self._fns()))

    @property
    def _pool_size(self) -> int:
        """Worker processes when scoring in workers (num_workers=0 off the main thread: 1)."""
        return max(1, self.num_workers)

    def _replace(self, w: _Worker) -> None:
        w.kill()
        self._workers[self._workers.index(w)] = _Worker(self._ctx, self._fns())
        self.restarts += 1

    def close(self) -> None:
        """Stop and reap all workers (idempotent)."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> "RewardScorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def worker_pids(self) -> List[int]:
        return [w.proc.pid for w in self._workers]

    # -- scoring -------------------------------------------------------------------------
    def __call__(self, completions: Sequence[str], **columns) -> RewardResult:
        return self.score(completions, **columns)

    def score(self, completions: Sequence[str], **columns) -> RewardResult:
        """Score ``completions`` with every component; ``columns`` are lists aligned with them."""
        if self._closed:
            raise RuntimeError("RewardScorer is closed")
        n = len(completions)
        completions = list(completions)
        for k, v in columns.items():
            if v is None or len(v) != n:
                raise ValueError(f"column '{k}' must be a list of {n} values")
        columns = {k: list(v) for k, v in columns.items()}
        K = len(self.components)
        scores: List[List[Optional[float]]] = [[None] * n for _ in range(K)]
        timeouts = [0] * K
        errors = [0] * K
        batch_limit = (self.batch_timeout if self.batch_timeout is not None
                       else self.timeout * max(1, n))
        tasks: List[_Task] = []
        for c, comp in enumerate(self.components):
            if comp.in_process:
                continue
            if comp.batch_level:
                tasks.append(_Task(len(tasks), c, list(range(n)), batch_limit))
            else:
                base = len(tasks)
                tasks.extend([_Task(base + i, c, [i], self.timeout) for i in range(n)])
        if n and tasks:
            if self.num_workers == 0 and _inline_limit_works():
                self._score_inline(tasks, completions, columns, scores, timeouts, errors)
            else:
                if self.num_workers == 0 and not self._said_thread:
                    self._said_thread = True
                    logger.warning("reward.num_workers=0 outside the main thread: scoring in one "
                                   "worker process, since the per-item time limit of an "
                                   "in-process scorer needs SIGALRM, which only the main "
                                   "thread receives")
                self._score_pool(tasks, completions, columns, scores, timeouts, errors)
        outputs: Dict[str, List[Optional[str]]] = {}
        counts: Dict[str, Dict[str, int]] = {}
        for c, comp in enumerate(self.components):
            if comp.in_process and n:
                self._score_model(c, completions, columns, scores, timeouts, errors, outputs,
                                  counts)
        result = self._result(scores, timeouts, errors)
        result.outputs, result.counts = outputs, counts
        return result

    def _score_model(self, c, completions, columns, scores, timeouts, errors, outputs,
                     counts) -> None:
        """A model reward on the whole batch, in this process: its scores, outputs, counters
        and timeouts (counted in ``reward/timeouts`` with the others)."""
        comp = self.components[c]
        n = len(completions)
        try:
            if hasattr(comp.fn, "score_batch"):
                res = comp.fn.score_batch(completions, **columns)
                values, outs, cnt = list(res.scores), list(res.outputs), dict(res.counts)
            else:
                values, outs, cnt = list(comp.fn(completions, **columns)), [], {}
            if len(values) != n:
                raise ValueError(f"reward returned {len(values)} scores for {n} completions")
        except Exception as e:  # noqa: BLE001 - a failing model reward scores its batch None
            errors[c] += n
            logger.warning("reward '%s' raised on a batch of %d: %s: %s; scored None",
                           comp.key, n, type(e).__name__, str(e)[:300])
            return
        scores[c] = [None if v is None else float(v) for v in values]
        timeouts[c] += int(cnt.get("timeouts", 0))
        if outs:
            outputs[comp.key] = outs
        counts[comp.key] = cnt

    def _payload(self, t: _Task, completions, columns):
        if len(t.items) == 1 and not self.components[t.comp].batch_level:
            i = t.items[0]
            return (t.task_id, t.comp, [completions[i]], {k: [v[i]] for k, v in columns.items()})
        return (t.task_id, t.comp, completions, columns)

    def _record(self, t: _Task, values, scores) -> None:
        for i, v in zip(t.items, values):
            scores[t.comp][i] = v

    def _log(self, what: str, t: _Task, detail: str = "") -> None:
        where = f"item {t.items[0]}" if len(t.items) == 1 else f"batch of {len(t.items)}"
        logger.warning("reward '%s' %s on %s%s; scored None", self.components[t.comp].key,
                       what, where, f": {detail}" if detail else "")

    def _score_inline(self, tasks, completions, columns, scores, timeouts, errors) -> None:
        fns = self._fns()
        with _ItemTimer() as dog:
            for t in tasks:
                _, comp, comps, cols = self._payload(t, completions, columns)
                values, failure = None, None
                try:
                    try:
                        dog.start(t.limit)
                        values = _run_task(fns, comp, comps, cols)
                    finally:
                        late = dog.stop()
                except _InlineTimeout:
                    late = True
                except Exception as e:  # noqa: BLE001
                    failure = f"{type(e).__name__}: {e}"
                if late:                # cut, or finished only after the limit: as a worker
                    timeouts[t.comp] += 1
                    self._log(f"timed out after {t.limit:g}s", t)
                elif failure is not None:
                    errors[t.comp] += 1
                    self._log("raised", t, failure)
                else:
                    self._record(t, values, scores)

    def _score_pool(self, tasks, completions, columns, scores, timeouts, errors) -> None:
        self._start()
        n_items = len(tasks)
        size = self.chunk_size or max(1, min(16, math.ceil(n_items / (4 * self._pool_size))))
        queue: Deque[List[_Task]] = deque()
        item_tasks = [t for t in tasks if not self.components[t.comp].batch_level]
        # batch-level tasks first: they are the longest
        for t in tasks:
            if self.components[t.comp].batch_level:
                queue.append([t])
        for s in range(0, len(item_tasks), size):
            queue.append(item_tasks[s:s + size])
        by_id = {t.task_id: t for t in tasks}

        def fail(w: _Worker, kind: str) -> None:
            t = w.chunk.popleft()
            if kind == "timeout":
                timeouts[t.comp] += 1
                self._log(f"timed out after {t.limit:g}s", t)
            else:
                errors[t.comp] += 1
                self._log("crashed its worker", t, f"exit code {w.proc.exitcode}")
            if w.chunk:
                queue.appendleft(list(w.chunk))
                w.chunk.clear()
            self._replace(w)

        while queue or any(w.chunk for w in self._workers):
            now = time.monotonic()
            for w in self._workers:
                if not w.chunk and queue:
                    chunk = queue.popleft()
                    try:
                        w.conn.send([self._payload(t, completions, columns) for t in chunk])
                    except (OSError, BrokenPipeError):
                        queue.appendleft(chunk)
                        self._replace(w)
                        break
                    w.chunk.extend(chunk)
                    w.started = now
            busy = [w for w in self._workers if w.chunk]
            if not busy:
                continue
            deadline = min(w.started + w.chunk[0].limit for w in busy)
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy],
                         timeout=max(0.0, deadline - time.monotonic()))
            ready_set = set(ready)
            for w in list(busy):
                if w.conn in ready_set or (w.proc.sentinel in ready_set and w.conn.poll()):
                    try:
                        while w.chunk and w.conn.poll():
                            task_id, status, value = w.conn.recv()
                            t = w.chunk.popleft()
                            assert t.task_id == task_id, "worker answered out of order"
                            if status == "ok":
                                self._record(by_id[task_id], value, scores)
                            else:
                                errors[t.comp] += 1
                                self._log("raised", t, value)
                            w.started = time.monotonic()
                    except (EOFError, OSError):
                        if w.chunk:
                            fail(w, "crash")
                        continue
                if w.chunk and w.proc.sentinel in ready_set and not w.conn.poll():
                    fail(w, "crash")
            now = time.monotonic()
            for w in list(self._workers):
                if w.chunk and now >= w.started + w.chunk[0].limit and not w.conn.poll():
                    fail(w, "timeout")

    def _result(self, scores, timeouts, errors) -> RewardResult:
        comps: Dict[str, List[Optional[float]]] = {}
        n = len(scores[0]) if scores else 0
        total = np.zeros(n, dtype=np.float64)
        for c, comp in enumerate(self.components):
            comps[comp.key] = scores[c]
            vals = np.array([self.none_as if v is None else v for v in scores[c]], dtype=np.float64)
            total += comp.weight * vals
        return RewardResult(
            components=comps, total=total,
            weights={c.key: c.weight for c in self.components},
            num_none={c.key: sum(v is None for v in scores[i])
                      for i, c in enumerate(self.components)},
            num_timeouts={c.key: timeouts[i] for i, c in enumerate(self.components)},
            num_errors={c.key: errors[i] for i, c in enumerate(self.components)},
        )
