"""Summarise a MINDRL_RSS_LOG file (tests/conftest.py): per test file and process, RSS at start/end and peak (MB).

Usage: MINDRL_RSS_LOG=/tmp/rss.jsonl .venv/bin/python -m pytest -q tests/backends/mindspore; python bench/rss_by_file.py /tmp/rss.jsonl"""
import json, sys
from collections import OrderedDict
rows = [json.loads(l) for l in open(sys.argv[1])]
parent = rows[0].get("pid") if rows else None
pids = OrderedDict()
for r in rows:
    pids.setdefault(r.get("pid"), 0)
files = OrderedDict()
for r in rows:
    key = (r["test"].split("::")[0], r.get("pid"))
    d = files.setdefault(key, {"first_before": r["before_mb"], "peak": 0, "after": 0, "n": 0})
    d["peak"] = max(d["peak"], r["peak_mb"]); d["after"] = r["after_mb"]; d["n"] += 1
print(f"{'file':58s} {'proc':>6s} {'n':>3s} {'start':>6s} {'end':>6s} {'peak':>6s}")
for (f, pid), d in files.items():
    print(f"{f:58s} {str(pid)[-6:]:>6s} {d['n']:3d} {d['first_before']:6d} {d['after']:6d} {d['peak']:6d}")
by_pid = {}
for r in rows:
    by_pid[r.get("pid")] = max(by_pid.get(r.get("pid"), 0), r["peak_mb"])
print("peak MB per process:", by_pid)
print("max over processes MB:", max(by_pid.values()))
