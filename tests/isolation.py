"""Heavy test modules run in a child pytest process, one module per child, so that what they
leave behind (MindSpore's compiled graphs and kernels, vLLM engines, trainers' models) is handed
back to the system when the module ends instead of piling up in one long-lived process.

The parent collects as usual; at the first selected test of an isolated module it runs a child
``python -m pytest MODULE`` restricted to that module's selected tests, and replays the child's
reports (pass/fail/skip, tracebacks, captured output) as its own, so results, ``-x``, ``-ra`` and
the summary read as if the tests had run in-process. A child that dies without reporting (a
crash, an out-of-memory kill) fails the test it was running, with its output's tail, and a
new child runs the module's remaining tests.

Isolated: the modules under :data:`HEAVY` (their growth measured with ``MINDRL_RSS_LOG``, see
conftest.py). ``MINDRL_TEST_ISOLATE=0`` runs everything in one process (for a debugger); a run
that selects a single module runs it in-process as well.
"""

import json
import os
import subprocess
import sys
import tempfile
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
def pytest_collection_finish(session):
    session.config._isolated_modules = _wanted(session)
    session.config._isolated_reports = {}


def _run_child(item) -> dict:
    """Run the selected tests of ``item``'s module from ``item`` on in a child:
    {nodeid: [TestReport]}, and under "<child>" (its first test, exit code, output's tail)."""
    config, mod = item.config, _module(item)
    ids = [i.nodeid for i in item.session.items if _module(i) == mod]
    ids = ids[ids.index(item.nodeid):][:CHUNK.get(mod, len(ids))]
    base = Path(str(config._tmp_path_factory.getbasetemp()))
    work = Path(tempfile.mkdtemp(prefix="child-", dir=base))
    (work / "ids.json").write_text(json.dumps(ids))
    env = dict(os.environ)
    env[CHILD_ENV] = str(work)
    env.setdefault("MINDRL_TEST_CACHE", str(base / "cache"))   # builtin:tiny built once
    cmd = [sys.executable, "-m", "pytest", mod, "-q", "-p", "no:cacheprovider",
           f"--basetemp={work / 'tmp'}", f"--rootdir={config.rootpath}"]
    if config.option.capture == "no":
        cmd.append("-s")
    if config.option.maxfail:
        cmd.append(f"--maxfail={config.option.maxfail}")
    proc = subprocess.run(cmd, cwd=str(config.rootpath), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    out = {}
    path = work / "reports.jsonl"
    for line in (path.read_text().splitlines() if path.exists() else []):
        rep = config.hook.pytest_report_from_serializable(config=config, data=json.loads(line))
        if isinstance(rep.longrepr, list):        # a skip's (path, line, reason): JSON made it a list
            rep.longrepr = tuple(rep.longrepr)
        out.setdefault(rep.nodeid, []).append(rep)
    out["<child>"] = (ids[0], proc.returncode, proc.stdout[-6000:])
    return out


def _lost(item, child) -> list:
    from _pytest.reports import TestReport

    _, rc, tail = child
    how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
    return [TestReport(item.nodeid, item.location, {}, "failed",
                       f"the child pytest process running {_module(item)} {how} before this "
                       f"test finished; its output ends with:\n{tail}", "call", [])]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    config = item.config
    if _module(item) not in getattr(config, "_isolated_modules", ()):
        return None
    cache = config._isolated_reports
    reports = cache.get(_module(item))
    if reports is None or (item.nodeid not in reports
                           and reports["<child>"][0] != item.nodeid):
        # the module's first test, the child died before this one, or its chunk (CHUNK) ended
        # before it: a (new) child from here
        cache.clear()                     # one module's reports at a time
        reports = cache[_module(item)] = _run_child(item)
    mine = reports.get(item.nodeid, [])
    if not any(r.when == "teardown" for r in mine):
        mine = mine + _lost(item, reports["<child>"])
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
