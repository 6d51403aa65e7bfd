"""Heavy test modules run in a child pytest process, one module per child, so that what they
leave behind (MindSpore's compiled graphs and kernels, vLLM engines, trainers' models) is handed
back to the system when the module ends instead of piling up in one long-lived process.

The parent collects as usual; at the first selected test of an isolated module it runs a child
``python -m pytest MODULE`` restricted to that module's selected tests, and replays the child's
reports (pass/fail/skip, tracebacks, captured output) as its own, so results, ``-x``, ``-ra`` and
the summary read as if the tests had run in-process. A child that dies without reporting (a
crash, an out-of-memory kill) fails the test it was running, with its output's tail, and a
new child runs the module's remaining tests.

Children run ahead: ``MINDRL_TEST_JOBS`` lanes (default 1) start the isolated modules' children
in background threads, in collection order, while the parent runs the light modules in-process;
when the parent reaches a module no lane has started it runs that child itself, and while it
waits for one a lane is running it runs the next queued child. On 2 cores the suite then keeps
both busy. ``MINDRL_TEST_JOBS=0`` runs each child when its module comes up.

Isolated: the modules under :data:`HEAVY` (their growth measured with ``MINDRL_RSS_LOG``, see
conftest.py). ``MINDRL_TEST_ISOLATE=0`` runs everything in one process (for a debugger); a run
that selects a single module runs it in-process as well.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

CHILD_ENV = "MINDRL_TEST_CHILD"            # set in a child: path of its JSON files (in/out)
HEAVY = (
    "tests/algorithms/test_loss_smoke.py",       # MindSpore graphs of every loss: +2.0 GB
    "tests/algorithms/test_distill.py",          # +0.85 GB
    "tests/config/test_options_read.py",         # an in-process vLLM engine: +1 GB at peak
    "tests/backends/mindspore/",
    "tests/backends/test_lora_mindspore.py",
    "tests/trainer/",
    "tests/rollout/",
    "tests/tools/test_multi_turn_vllm.py",
)

# Modules whose tests each leave a lot behind (a MindSpore run of a recipe: 0.3-1.6 GB): a child
# runs at most this many of their tests, then a new one goes on (measured: test_recipe_smoke's
# 29 tests in one child reached 8.1 GB).
CHUNK = {"tests/trainer/test_recipe_smoke.py": 6}


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


def _wanted(session) -> set:
    if os.environ.get(CHILD_ENV) or os.environ.get("MINDRL_TEST_ISOLATE", "1") == "0":
        return set()
    mods = {_module(i) for i in session.items}
    if len(mods) < 2:
        return set()
    return {m for m in mods if m.startswith(HEAVY)}


# ------------------------------------------------------------------------------- parent side
class _Job:
    """One child run: the selected tests ``ids`` of module ``mod`` (a CHUNK of them at most)."""

    def __init__(self, mod, ids):
        self.mod, self.ids = mod, ids
        self.done = threading.Event()
        self.result = None
        self.proc = None


def _jobs_ahead() -> int:
    """How many children run ahead of the parent, in background threads, while it runs the
    light modules in-process: ``MINDRL_TEST_JOBS`` (0 = each child when its module comes up, as
    a plain serial run); default 1, so a 2-core machine runs the parent and one child at once."""
    try:
        return max(0, int(os.environ.get("MINDRL_TEST_JOBS", "1")))
    except ValueError:
        raise pytest.UsageError("MINDRL_TEST_JOBS must be an integer (0 = run children serially)")


def pytest_collection_finish(session):
    config = session.config
    config._isolated_modules = mods = _wanted(session)
    config._isolated_jobs = {}                      # nodeid -> _Job
    config._isolated_threads = []
    if not mods:
        return
    jobs, by_mod = [], {}
    for item in session.items:
        mod = _module(item)
        if mod in mods:
            by_mod.setdefault(mod, []).append(item.nodeid)
    for mod, ids in by_mod.items():                  # in the order the modules come up
        step = CHUNK.get(mod, len(ids))
        for k in range(0, len(ids), step):
            job = _Job(mod, ids[k:k + step])
            jobs.append(job)
            for nid in job.ids:
                config._isolated_jobs[nid] = job
    config._isolated_queue = list(jobs)
    # the environment as it is before any test runs: a lane starts children while the parent's
    # tests run, and those may set variables for themselves (monkeypatch, fixtures)
    config._isolated_env = dict(os.environ)
    config._isolated_lock = threading.Lock()
    n = _jobs_ahead()
    for _ in range(min(n, len(jobs))):
        t = threading.Thread(target=_lane, args=(config,), daemon=True)
        t.start()
        config._isolated_threads.append(t)


def _next_job(config):
    with config._isolated_lock:
        while config._isolated_queue:
            job = config._isolated_queue.pop(0)
            if not job.done.is_set() and job.result is None:
                job.result = "running"
                return job
    return None


def _lane(config):
    """A background lane: runs the queued children in collection order, one at a time."""
    while not getattr(config, "_isolated_stop", False):
        job = _next_job(config)
        if job is None:
            return
        try:
            job.result = _run_child(config, job.mod, job.ids, job)
        except BaseException as e:               # never leave the parent waiting
            job.result = {"<child>": (job.ids[0], -1, f"the child could not run: {e!r}")}
        job.done.set()


def pytest_sessionfinish(session):
    config = session.config
    config._isolated_stop = True
    with getattr(config, "_isolated_lock", threading.Lock()):
        config.__dict__.get("_isolated_queue", []).clear()
    for job in set(getattr(config, "_isolated_jobs", {}).values()):
        if job.proc is not None and job.proc.poll() is None:
            job.proc.kill()


_PRCTL = None
try:                                       # Linux: a child gets SIGKILL when its parent dies
    import ctypes
    import signal

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    pass


def _die_with_parent():
    """In the forked child, before exec: end with the thread that started it (PR_SET_PDEATHSIG),
    so a killed parent (Ctrl-C twice, a CI timeout) leaves no child running a module."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL, 0, 0, 0)


def _run_child(config, mod, ids, job=None) -> dict:
    """Run the tests ``ids`` of module ``mod`` in a child: {nodeid: [TestReport]}, and under
    "<child>" (its first test, exit code, output's tail)."""
    base = Path(str(config._tmp_path_factory.getbasetemp()))
    work = Path(tempfile.mkdtemp(prefix="child-", dir=base))
    (work / "ids.json").write_text(json.dumps(ids))
    env = dict(config._isolated_env)
    env[CHILD_ENV] = str(work)
    env.setdefault("MINDRL_TEST_CACHE", str(base / "cache"))   # builtin:tiny built once
    cmd = [sys.executable, "-m", "pytest", mod, "-q", "-p", "no:cacheprovider",
           f"--basetemp={work / 'tmp'}", f"--rootdir={config.rootpath}"]
    if config.option.capture == "no":
        cmd.append("-s")
    if config.option.maxfail:
        cmd.append(f"--maxfail={config.option.maxfail}")
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=str(config.rootpath), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            preexec_fn=_die_with_parent)
    if job is not None:
        job.proc = proc
    stdout, _ = proc.communicate()
    out = {}
    path = work / "reports.jsonl"
    for line in (path.read_text().splitlines() if path.exists() else []):
        rep = config.hook.pytest_report_from_serializable(config=config, data=json.loads(line))
        if isinstance(rep.longrepr, list):        # a skip's (path, line, reason): JSON made it a list
            rep.longrepr = tuple(rep.longrepr)
        out.setdefault(rep.nodeid, []).append(rep)
    out["<child>"] = (ids[0], proc.returncode, stdout[-6000:])
    _timeline({"child": mod, "tests": len(ids), "start": t0, "end": time.time(),
               "thread": threading.current_thread().name})
    return out


def _timeline(row: dict) -> None:
    """``MINDRL_TEST_TIMELINE=path``: one JSON line per child run and per test run in the parent
    (what ran where and when, to see when a core sat idle)."""
    path = os.environ.get("MINDRL_TEST_TIMELINE")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def _lost(item, child) -> list:
    from _pytest.reports import TestReport

    _, rc, tail = child
    how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
    return [TestReport(item.nodeid, item.location, {}, "failed",
                       f"the child pytest process running {_module(item)} {how} before this "
                       f"test finished; its output ends with:\n{tail}", "call", [])]


def _reports_for(item) -> list:
    """The reports of ``item``: from its job (run ahead in a lane, or now); when the child died
    before reaching it, a new child runs the job's remaining tests from ``item`` on."""
    config = item.config
    job = config._isolated_jobs[item.nodeid]
    if _next_job_is(config, job):                 # not started by a lane: run it here
        job.result = _run_child(config, job.mod, job.ids, job)
        job.done.set()
    while not job.done.is_set():                  # a lane runs it: run the next queued one
        other = _next_job(config)                 # meanwhile, so both cores keep working
        if other is None:
            job.done.wait()
            break
        other.result = _run_child(config, other.mod, other.ids, other)
        other.done.set()
    reports = job.result
    if item.nodeid not in reports and reports["<child>"][0] != item.nodeid:
        rest = job.ids[job.ids.index(item.nodeid):]
        more = _run_child(config, job.mod, rest, job)
        reports = dict(reports)
        reports.update(more)
        reports["<child>"] = more["<child>"]
        job.result = reports
    mine = reports.get(item.nodeid, [])
    if not any(r.when == "teardown" for r in mine):
        mine = mine + _lost(item, reports["<child>"])
    return mine


def _next_job_is(config, job) -> bool:
    """Take ``job`` off the queue if no lane has started it (True: the caller runs it)."""
    with config._isolated_lock:
        if job in config._isolated_queue:
            config._isolated_queue.remove(job)
            job.result = "running"
            return True
    return False


class _ParentTimeline:
    """The parent's own tests on the timeline (the isolated ones are their children's rows)."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        t0 = time.time()
        yield
        if _module(item) not in getattr(item.config, "_isolated_modules", ()):
            _timeline({"parent": item.nodeid, "start": t0, "end": time.time()})


def pytest_configure(config):
    if os.environ.get("MINDRL_TEST_TIMELINE") and not os.environ.get(CHILD_ENV):
        config.pluginmanager.register(_ParentTimeline(), "mindrl-timeline")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    config = item.config
    if _module(item) not in getattr(config, "_isolated_modules", ()):
        return None
    mine = _reports_for(item)
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for rep in mine:
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    # the parent's own set-up stack (directories, session) follows the run as usual
    item.session._setupstate.teardown_exact(
        None if item.session.shouldstop or item.session.shouldfail else nextitem)
    return True


# -------------------------------------------------------------------------------- child side
if os.environ.get(CHILD_ENV):
    _WORK = Path(os.environ[CHILD_ENV])

    def pytest_collection_modifyitems(config, items):
        ids = set(json.loads((_WORK / "ids.json").read_text()))
        keep = [i for i in items if i.nodeid in ids]
        drop = [i for i in items if i.nodeid not in ids]
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    _CONFIG = []

    def pytest_configure(config):
        _CONFIG.append(config)

    def pytest_runtest_logreport(report):
        config = _CONFIG[0]
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        with open(_WORK / "reports.jsonl", "a") as f:
            f.write(json.dumps(data) + "\n")
