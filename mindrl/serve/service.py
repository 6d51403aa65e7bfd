"""A thread-safe scoring service: many callers, one set of reward workers, no batch barrier.

:class:`rewards.pool.RewardScorer` scores one batch per call and returns when the whole batch is
done. A server (or a framework that calls a reward once per sample from many threads) needs
more: requests arrive while others are being scored, and one request's pathological item must
not hold up another request. ``ScoringService`` keeps the pool's worker processes, its worker
protocol and its rules (``rewards.pool``: an item past ``timeout`` has its worker SIGKILLed and
replaced and scores None as a timeout; a worker that dies scores its item None as an error; an
exception in a reward scores None as an error) and changes only the scheduling:

  - every request is split into tasks (one per item and item-level component; one per
    batch-level component, on the whole request), queued in arrival order;
  - one dispatcher thread hands one task at a time to each idle worker, so a worker stuck on a
    pathological item holds exactly one task and the other workers keep serving everybody;
  - a request's future is resolved as soon as its own tasks are done.

So a normal item waits at most for a free worker, never for another request's slow item to
finish. When every worker is busy on a straggler (an item running longer than
``straggler_after``, default min(0.1 s, timeout/4)) and tasks are queued, a burst worker is
started (at most ``max_burst_workers`` extra, default ``4 * num_workers``) and serves the queue;
idle burst workers are retired, and stragglers are still killed at their own timeout. So a
clean item waits about ``straggler_after`` plus one worker start, not ``timeout``, unless more
than ``num_workers + max_burst_workers`` stragglers run at once. (Killing stragglers early
would score them wrongly; preempting them is not possible mid-call: extra processes are the
one way to bound clean latency independently of pathological items.)

Results are :class:`ServiceResult` objects (a :class:`rewards.pool.RewardResult`) with the same
total as the pool: ``total_i = sum_k w_k * (r_k,i if not None else none_as)``. A None score has
one of three causes, counted apart and kept per item: ``timeout`` (cut at the limit), ``error``
(the reward raised, crashed its worker, or returned NaN / inf) and ``unscored`` (the reward
itself returned None, e.g. a gold answer it cannot parse); ``messages`` says why, per component.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import math
import multiprocessing as mp
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence

import numpy as np

from rewards.pool import _PRELOAD, RewardResult, _Worker, build_components

logger = logging.getLogger(__name__)

__all__ = ["ColumnError", "ScoringService", "ServiceResult", "ServiceStats"]

_WARMUP = -1            # task id of a new worker's warm-up call
STARTUP_TIMEOUT = 120.0  # seconds a new worker may take to answer its warm-up call
MAX_FAILED_STARTS = 5    # workers that die before answering, in a row, before requests fail
MAX_MESSAGES = 5         # distinct failure messages kept per component of one request

#: Why an item of a component scored None (``ServiceResult.status``).
TIMEOUT, ERROR, UNSCORED = "timeout", "error", "unscored"


class ColumnError(ValueError):
    """A column the service refuses; ``column`` is its name."""

    def __init__(self, column: str, message: str):
        super().__init__(message)
        self.column = column


def _bound_settings(fn) -> List[str]:
    """Keyword arguments the configuration binds to a function reward (``params`` become a
    ``functools.partial``): a column of the same name would override them in the call."""
    fn = getattr(fn, "fn", fn)                      # AnyOfGold wraps the reward
    return list(fn.keywords) if isinstance(fn, functools.partial) else []


@dataclass
class ServiceStats:
    """Counters over the service's life (read them under no lock: ints are atomic enough)."""

    requests: int = 0
    items: int = 0
    tasks: int = 0
    timeouts: int = 0
    errors: int = 0
    unscored: int = 0
    restarts: int = 0
    deprioritized: int = 0


@dataclass
class ServiceResult(RewardResult):
    """A :class:`RewardResult` that also says why each None is None.

    status:      key -> N entries: None (scored), "timeout", "error" or "unscored"
    num_unscored: key -> count of "unscored" (the reward returned None by itself)
    messages:    key -> up to MAX_MESSAGES distinct one-line reasons for the Nones
    """

    status: Dict[str, List[Optional[str]]] = field(default_factory=dict)
    num_unscored: Dict[str, int] = field(default_factory=dict)
    messages: Dict[str, List[str]] = field(default_factory=dict)


@dataclass
class _Job:
    n: int
    comps: List[int]                         # component indices this job asked for
    weights: Dict[int, float]
    future: cf.Future
    scores: Dict[int, List[Optional[float]]] = field(default_factory=dict)
    status: Dict[int, List[Optional[str]]] = field(default_factory=dict)
    messages: Dict[int, List[str]] = field(default_factory=dict)
    left: int = 0

    def note(self, comp: int, message: str) -> None:
        msgs = self.messages[comp]
        if message not in msgs and len(msgs) < MAX_MESSAGES:
            msgs.append(message)


@dataclass
class _Task:
    job: _Job
    comp: int
    items: List[int]
    limit: float
    payload: tuple


class ScoringService:
    """Score requests from any number of threads on ``num_workers`` reward worker processes.

    Args:
      functions: reward config entries, as for :class:`rewards.pool.RewardScorer` (dicts with
        ``name``, ``weight``, ``params``; registered names or import paths).
      num_workers: worker processes (>= 1).
      timeout: limit in seconds for one item of one item-level component.
      none_as: value a None score contributes to the total.
      batch_timeout: limit for one batch-level call; None = ``timeout * request size``.
      start_method: ``forkserver`` (default where available), ``fork`` or ``spawn``.
      max_burst_workers: extra workers allowed while all workers are on stragglers
        (None = ``4 * num_workers``; 0 = never).
      straggler_after: seconds after which a running item counts as a straggler
        (None = min(0.1, timeout / 4)).
      deprioritize_stragglers: while tasks are queued, lower a straggler's worker to the lowest
        CPU priority (nice 19), so that the clean items on the other workers get the CPU first
        (a lone slow item is left at normal priority: on a loaded host nice 19 would starve it
        into its timeout); once its item ends the
        worker returns to the service's priority (or, without the right to raise a priority,
        is replaced), so the pool never keeps a slow worker.

    ``submit(completions, **columns)`` returns a ``concurrent.futures.Future`` of a
    :class:`RewardResult`; ``score(...)`` waits for it. ``rewards=`` picks a subset of the
    configured components by key, optionally with new weights (``{"accuracy": 1.0}``).
    """

    def __init__(self, functions: Sequence[Any], num_workers: int = 2, timeout: float = 5.0,
                 none_as: float = 0.0, batch_timeout: Optional[float] = None,
                 start_method: Optional[str] = None, max_burst_workers: Optional[int] = None,
                 straggler_after: Optional[float] = None, deprioritize_stragglers: bool = True):
        self.components = build_components(functions)
        for comp in self.components:        # a model reward's files: checked here, loaded by
            if comp.in_process and hasattr(comp.fn, "check"):     # each worker as it starts
                comp.fn.check()
        self.keys = [c.key for c in self.components]
        if num_workers < 1:
            raise ValueError("num_workers must be >= 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.num_workers = int(num_workers)
        self.timeout = float(timeout)
        self.none_as = float(none_as)
        self.batch_timeout = batch_timeout
        # Burst workers: when every worker is busy on a straggler (an item running longer than
        # straggler_after) and tasks are queued, start an extra worker (at most max_burst_workers)
        # so clean items do not wait for the stragglers' timeout; idle burst workers are retired.
        self.max_burst_workers = (4 * self.num_workers if max_burst_workers is None
                                  else int(max_burst_workers))
        self.deprioritize_stragglers = bool(deprioritize_stragglers)
        self.straggler_after = (min(0.1, self.timeout / 4) if straggler_after is None
                                else float(straggler_after))
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            self._ctx.set_forkserver_preload(_PRELOAD)
        self._fns = [c.fn for c in self.components]
        #: column names a request may not use -> why (the rewards' first argument, settings)
        self.reserved_columns = {"completions": "rewards take the completions as their first "
                                                "argument"}
        for comp in self.components:
            for name in _bound_settings(comp.fn):
                self.reserved_columns[name] = f"it is a setting of reward '{comp.key}'"
        self._workers: List[_Worker] = [self._spawn() for _ in range(self.num_workers)]
        self._failed_starts = 0
        self._queue: Deque[_Task] = deque()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = mp.Pipe(duplex=False)
        self._closed = False
        self.stats = ServiceStats()
        self._thread = threading.Thread(target=self._loop, name="mindrl-scoring", daemon=True)
        self._thread.start()

    # -- public ----------------------------------------------------------------------------
    @property
    def worker_pids(self) -> List[int]:
        with self._lock:
            return [w.proc.pid for w in self._workers]

    def submit(self, completions: Sequence[str], rewards: Optional[Mapping[str, Any]] = None,
               **columns) -> cf.Future:
        """Queue one request; its future resolves to a :class:`RewardResult`.

        ``columns`` are lists aligned with ``completions``. ``rewards``: component keys to
        compute (a list, or a mapping key -> weight, None = the configured weight); default all.
        Raises ValueError for an unknown key or a misaligned column.
        """
        return self.submit_columns(completions, columns, rewards)

    def submit_columns(self, completions: Sequence[str], columns: Mapping[str, Sequence[Any]],
                       rewards: Optional[Any] = None) -> cf.Future:
        """:meth:`submit` with the columns as one mapping. A column may have any name but those
        in ``reserved_columns`` (``completions``, which the rewards take as their first
        argument, and the settings the configuration binds to a function reward, which a column
        would override): ColumnError for those."""
        if self._closed:
            raise RuntimeError("ScoringService is closed")
        n = len(completions)
        for i, c in enumerate(completions):
            if not isinstance(c, str):
                raise TypeError(f"completions[{i}] must be a string, got {type(c).__name__}")
        completions = list(completions)
        for k, v in columns.items():
            if k in self.reserved_columns:
                raise ColumnError(k, f"'{k}' cannot be a column name: "
                                     f"{self.reserved_columns[k]}")
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or len(v) != n:
                raise ColumnError(k, f"column '{k}' must be a list of {n} values")
        columns = {k: list(v) for k, v in columns.items()}
        comps, weights = self._select(rewards)
        fut: cf.Future = cf.Future()
        job = _Job(n, comps, weights, fut)
        tasks: List[_Task] = []
        batch_limit = (self.batch_timeout if self.batch_timeout is not None
                       else self.timeout * max(n, 1))
        for c in comps:
            job.scores[c] = [None] * n
            job.status[c] = [None] * n
            job.messages[c] = []
            if self.components[c].batch_level:
                tasks.append(_Task(job, c, list(range(n)), batch_limit, (c, completions, columns)))
            else:
                tasks.extend(_Task(job, c, [i], self.timeout,
                                   (c, [completions[i]], {k: [v[i]] for k, v in columns.items()}))
                             for i in range(n))
        job.left = len(tasks)
        self.stats.requests += 1
        self.stats.items += n
        if not tasks:
            fut.set_result(self._result(job))
            return fut
        with self._lock:
            self._queue.extend(tasks)
        self._wake_w.send_bytes(b"x")
        return fut

    def score(self, completions: Sequence[str], rewards=None, **columns) -> "ServiceResult":
        """``submit(...).result()``."""
        return self.submit(completions, rewards=rewards, **columns).result()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the dispatcher and every worker within about ``timeout`` seconds: idle workers
        are asked to exit, busy ones (their item's answer would go nowhere) and any that do not
        exit in time are killed. Pending requests fail with RuntimeError."""
        if self._closed:
            return
        self._closed = True
        try:
            self._wake_w.send_bytes(b"x")
        except OSError:
            pass
        self._thread.join(timeout=timeout)
        with self._lock:
            workers = list(self._workers)
            pending = {id(t.job): t.job for t in self._queue}
            self._queue.clear()
        for w in workers:
            pending.update({id(t.job): t.job for t in w.chunk})
            if w.chunk:
                w.proc.kill()
            else:
                try:
                    w.conn.send(None)
                except (OSError, BrokenPipeError, ValueError):
                    pass
        deadline = time.monotonic() + timeout
        for w in workers:
            w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(timeout=1.0)
            try:
                w.conn.close()
            except OSError:
                pass
        for job in pending.values():
            if not job.future.done():
                job.future.set_exception(RuntimeError("ScoringService closed"))

    def __enter__(self) -> "ScoringService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------
    def _select(self, rewards) -> tuple:
        if rewards is None:
            comps = list(range(len(self.components)))
            return comps, {c: self.components[c].weight for c in comps}
        items = rewards.items() if isinstance(rewards, Mapping) else [(k, None) for k in rewards]
        comps, weights = [], {}
        for key, w in items:
            if key not in self.keys:
                raise ValueError(f"unknown reward '{key}'; this server scores {self.keys}")
            c = self.keys.index(key)
            comps.append(c)
            weights[c] = self.components[c].weight if w is None else float(w)
        if not comps:
            raise ValueError("'rewards' selects no reward")
        return comps, weights

    def _result(self, job: _Job) -> ServiceResult:
        total = np.zeros(job.n, dtype=np.float64)
        comps: Dict[str, List[Optional[float]]] = {}
        for c in job.comps:
            vals = job.scores[c]
            comps[self.keys[c]] = vals
            total += job.weights[c] * np.array([self.none_as if v is None else v for v in vals],
                                               dtype=np.float64)
        keys = {c: self.keys[c] for c in job.comps}
        return ServiceResult(
            components=comps, total=total,
            weights={keys[c]: job.weights[c] for c in job.comps},
            num_none={keys[c]: sum(v is None for v in job.scores[c]) for c in job.comps},
            num_timeouts={keys[c]: job.status[c].count(TIMEOUT) for c in job.comps},
            num_errors={keys[c]: job.status[c].count(ERROR) for c in job.comps},
            status={keys[c]: job.status[c] for c in job.comps},
            num_unscored={keys[c]: job.status[c].count(UNSCORED) for c in job.comps},
            messages={keys[c]: job.messages[c] for c in job.comps if job.messages[c]})

    def _finish(self, t: _Task, values=None, failure: Optional[str] = None) -> None:
        """Record a task's scores, or its failure (``"timeout"`` or a one-line error) on each
        of its items; a None score is "unscored", a NaN / inf score an error."""
        job, c = t.job, t.comp
        self.stats.tasks += 1
        where = f"item {t.items[0]}" if len(t.items) == 1 else f"batch of {len(t.items)}"
        if failure is not None:
            kind = TIMEOUT if failure == "timeout" else ERROR
            for i in t.items:
                job.status[c][i] = kind
            if kind == TIMEOUT:
                self.stats.timeouts += 1
                job.note(c, f"timed out after {t.limit:g} s (the server's per-item timeout)")
            else:
                self.stats.errors += 1
                job.note(c, failure)
            logger.warning("reward '%s' %s on %s; scored None", self.keys[c], failure, where)
        else:
            for i, v in zip(t.items, values):
                if v is None:
                    job.status[c][i] = UNSCORED
                    self.stats.unscored += 1
                    job.note(c, "returned null: the reward could not score the item (for "
                                "a gold-answer reward: a gold answer it cannot parse)")
                elif not math.isfinite(v):
                    job.status[c][i] = ERROR
                    self.stats.errors += 1
                    job.note(c, f"returned a non-finite score ({v}); scored null")
                else:
                    job.scores[c][i] = v
        job.left -= 1
        if job.left == 0 and not job.future.done():
            job.future.set_result(self._result(job))

    def _spawn(self) -> _Worker:
        """A new worker, sent a warm-up call (an empty batch): it gets tasks only once it has
        answered, so a slow start (a worker re-importing a heavy ``__main__``) is never charged
        to an item's time limit."""
        for attempt in range(40):
            try:
                w = _Worker(self._ctx, self._fns)
                break
            except (EOFError, OSError):
                # the forkserver died (its workers die with it): multiprocessing starts a new
                # one once it has seen the old one exit
                if attempt == 39:
                    raise
                time.sleep(0.05)
        w.ready, w.spawned = False, time.monotonic()
        try:
            w.conn.send([(_WARMUP, 0, [], {})])
        except (OSError, BrokenPipeError):
            pass
        return w

    def _replace(self, w: _Worker) -> _Worker:
        w.kill()
        new = self._spawn()
        with self._lock:
            self._workers[self._workers.index(w)] = new
        self.stats.restarts += 1
        return new

    def _deprioritize(self, w: _Worker) -> None:
        """Nice a straggler's worker to 19 (its item keeps running, at the lowest priority)."""
        w.niced = True
        try:
            os.setpriority(os.PRIO_PROCESS, w.proc.pid, 19)
            self.stats.deprioritized += 1
        except (OSError, AttributeError):   # the process just ended, or no setpriority here
            pass

    def _recycle(self, w: _Worker) -> None:
        """A deprioritized worker whose item ended goes back to normal priority; where this
        process may not raise a priority (no CAP_SYS_NICE), a burst worker leaves and a regular
        one is replaced by a fresh worker (a forkserver start, off every item's clock)."""
        try:
            os.setpriority(os.PRIO_PROCESS, w.proc.pid, os.getpriority(os.PRIO_PROCESS, 0))
            w.niced = False
            return
        except OSError:
            pass
        if getattr(w, "burst", False):
            self._retire(w)
            return
        w.kill()
        new = self._spawn()
        with self._lock:
            self._workers[self._workers.index(w)] = new

    def _retire(self, w: _Worker) -> None:
        w.kill()
        with self._lock:
            self._workers.remove(w)

    def _fail(self, w: _Worker, kind: str) -> None:
        t = w.chunk.popleft()
        detail = ("timeout" if kind == "timeout"
                  else f"crashed its worker (exit code {w.proc.exitcode})")
        if getattr(w, "burst", False):
            self._retire(w)
            self.stats.restarts += 1
        else:
            self._replace(w)
        self._finish(t, failure=detail)

    def _check_start(self, w: _Worker, ready: set) -> None:
        """Mark a new worker ready once it answers its warm-up call; replace it if it dies
        or does not answer within STARTUP_TIMEOUT."""
        try:
            if w.conn in ready and w.conn.poll():
                w.conn.recv()                       # ("ok" or "error": it runs; both are fine)
                w.ready = True
                self._failed_starts = 0
                return
        except (EOFError, OSError):
            pass
        if not w.proc.is_alive() or time.monotonic() > w.spawned + STARTUP_TIMEOUT:
            self._failed_starts += 1
            if self._failed_starts > MAX_FAILED_STARTS:
                raise RuntimeError(f"{self._failed_starts} reward workers in a row died or hung "
                                   "before answering their first call")
            self._replace(w)

    def _loop(self) -> None:
        try:
            self._run()
        except Exception:  # noqa: BLE001 - a dispatcher bug must not leave callers waiting
            logger.exception("scoring dispatcher stopped")
            self._closed = True
            with self._lock:
                jobs = {id(t.job): t.job for t in self._queue}
                self._queue.clear()
            for w in self._workers:
                jobs.update({id(t.job): t.job for t in w.chunk})
            for job in jobs.values():
                if not job.future.done():
                    job.future.set_exception(RuntimeError("reward dispatcher failed"))

    def _run(self) -> None:
        by_id: Dict[int, _Task] = {}
        next_id = 0
        while not self._closed:
            for w in list(self._workers):
                if w.chunk or not w.ready or getattr(w, "niced", False):
                    continue
                if not w.proc.is_alive():      # died between tasks: nothing was lost
                    w = self._replace(w)
                    continue
                with self._lock:
                    t = self._queue.popleft() if self._queue else None
                if t is None:
                    break
                next_id += 1
                by_id[next_id] = t
                try:
                    w.conn.send([(next_id, *t.payload)])
                except (OSError, BrokenPipeError):
                    with self._lock:
                        self._queue.appendleft(t)
                    self._replace(w)
                    continue
                w.chunk.append(t)
                w.task_id = next_id
                w.started = time.monotonic()
            now = time.monotonic()
            for w in list(self._workers):
                if w.ready and not w.chunk and getattr(w, "niced", False):
                    self._recycle(w)            # its straggler ended: no slow worker stays
                elif getattr(w, "burst", False) and w.ready and not w.chunk and not self._queue:
                    self._retire(w)             # idle burst worker
                elif (self.deprioritize_stragglers and w.chunk and not getattr(w, "niced", False)
                      and self._queue and now - w.started >= self.straggler_after):
                    # only while tasks wait: a lone slow item on a loaded host, niced with nobody
                    # to make room for, would be starved into its timeout
                    self._deprioritize(w)
            straggler_wake = []
            if self._queue:
                # keep num_workers workers that are not stuck: count the ready ones not on a
                # straggler and the ones starting; start burst workers for the difference
                healthy = sum(1 for w in self._workers if not w.ready or not w.chunk
                              or now - w.started < self.straggler_after)
                if healthy < self.num_workers and \
                        sum(getattr(w, "burst", False) for w in self._workers) < self.max_burst_workers:
                    nw = self._spawn()
                    nw.burst = True
                    with self._lock:
                        self._workers.append(nw)
                else:
                    straggler_wake = [w.started + self.straggler_after
                                      for w in self._workers
                                      if w.chunk and w.started + self.straggler_after > now]
            elif self.deprioritize_stragglers:
                straggler_wake = [w.started + self.straggler_after for w in self._workers
                                  if w.chunk and not getattr(w, "niced", False)
                                  and w.started + self.straggler_after > now]
            starting = [w for w in self._workers if not w.ready]
            busy = [w for w in self._workers if w.chunk]
            timeout = None
            deadlines = ([w.started + w.chunk[0].limit for w in busy] + straggler_wake
                         + [w.spawned + STARTUP_TIMEOUT for w in starting])
            if deadlines:
                timeout = max(0.0, min(deadlines) - time.monotonic())
            if starting:
                timeout = 0.05 if timeout is None else min(timeout, 0.05)
            ready = set(wait([self._wake_r] + [w.conn for w in busy + starting]
                             + [w.proc.sentinel for w in busy + starting], timeout=timeout))
            if self._wake_r in ready:
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
            for w in starting:
                self._check_start(w, ready)
            for w in busy:
                got = False
                if w.conn in ready or w.proc.sentinel in ready:
                    try:
                        if w.conn.poll():
                            task_id, status, value = w.conn.recv()
                            t = w.chunk.popleft()
                            by_id.pop(task_id, None)
                            got = True
                            if status == "ok":
                                self._finish(t, values=value)
                            else:
                                self._finish(t, failure=f"raised ({value})")
                    except (EOFError, OSError):
                        pass
                if not got and w.chunk and w.proc.sentinel in ready and not w.proc.is_alive():
                    by_id.pop(w.task_id, None)
                    self._fail(w, "crash")
            now = time.monotonic()
            for w in list(self._workers):
                if w.chunk and now >= w.started + w.chunk[0].limit and not w.conn.poll():
                    by_id.pop(w.task_id, None)
                    self._fail(w, "timeout")
