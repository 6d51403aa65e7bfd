"""Where the suite's wall time went: reads a MINDRL_TEST_TIMELINE file (tests/isolation.py) and
prints how long 0, 1, 2, ... processes were running tests, and the longest child runs and parent
modules. Usage: python .ci/timeline.py FILE [--top N]"""

import argparse
import json
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    rows = [json.loads(x) for x in open(a.file) if x.strip()]
    if not rows:
        raise SystemExit(f"{a.file}: no rows")
    t0 = min(r["start"] for r in rows)
    t1 = max(r["end"] for r in rows)
    events = sorted([(r["start"], 1) for r in rows] + [(r["end"], -1) for r in rows])
    at, level, share = t0, 0, defaultdict(float)
    for t, d in events:
        share[level] += t - at
        at, level = t, level + d
    print(f"span {t1 - t0:.0f} s; time with N processes running tests:")
    for n in sorted(share):
        print(f"  {n}: {share[n]:8.0f} s ({share[n] / (t1 - t0):.0%})")
    kids = sorted((r for r in rows if "child" in r), key=lambda r: r["start"] - r["end"])
    print(f"\nlongest child runs (of {len(kids)}): seconds, start offset, module")
    for r in kids[:a.top]:
        print(f"  {r['end'] - r['start']:7.0f} {r['start'] - t0:7.0f}  {r['child']} "
              f"({r['tests']} tests)")
    mods = defaultdict(lambda: [0.0, 1e18, 0.0])
    for r in rows:
        if "parent" in r:
            m = mods[r["parent"].split("::")[0]]
            m[0] += r["end"] - r["start"]
            m[1], m[2] = min(m[1], r["start"]), max(m[2], r["end"])
    print("\nlongest modules run in the parent: seconds, start offset, end offset, module")
    for mod, (s, b, e) in sorted(mods.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"  {s:7.0f} {b - t0:7.0f} {e - t0:7.0f}  {mod}")


if __name__ == "__main__":
    main()
