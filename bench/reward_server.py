"""Load test of ``mindrl serve-rewards`` on loopback: items/s and request latency at 1, 4 and 16
concurrent clients, with pathological items mixed in.

    .venv/bin/python bench/reward_server.py                      # 2 workers, 10 s per level
    .venv/bin/python bench/reward_server.py --clients 1,4 --seconds 5 --workers 2

Each client loops: POST /score with a batch of ``--batch`` completions (rewards: accuracy +
format 0.5), gold answers aligned. Completions are right or wrong boxed answers to simple
fractions; one request in ``--bad-every`` carries one pathological item, ``\\boxed{9^{9^{9^9}}}``,
which math-verify cannot finish and the server cuts at ``--timeout``. Reported per level:
items/s (answered items / wall time), p50 / p99 request latency, the same for requests without a
pathological item ("clean"), how many clean requests took longer than the timeout, and the
timeouts the server counted. Clients are threads of this process (urllib); the server is a
subprocess with its own worker processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent / "tests" / "integrations"), str(HERE.parent)] + \
    [p for p in sys.path if Path(p or ".").resolve() != HERE]

from server_util import http, reward_server  # noqa: E402

BAD = "\\boxed{9^{9^{9^9}}}"


def make_batch(rng_state: int, size: int, bad: bool):
    comps, gold = [], []
    for j in range(size):
        a, b = (rng_state + j) % 9 + 1, (rng_state * 7 + j) % 11 + 2
        right = (j + rng_state) % 2 == 0
        ans = f"\\frac{{{a}}}{{{b}}}" if right else f"\\frac{{{a + 1}}}{{{b}}}"
        comps.append(f"<think>\nwork\n</think>\n<answer>\n\\boxed{{{ans}}}\n</answer>")
        gold.append(str(a / b) if j % 3 else f"{a}/{b}")
    if bad:
        comps[size // 2] = BAD
    return comps, gold


def run_level(base: str, clients: int, seconds: float, batch: int, bad_every: int, timeout: float):
    stop = time.monotonic() + seconds
    lat, clean_lat, items = [], [], [0]
    lock = threading.Lock()

    def client(cid: int):
        k = 0
        while time.monotonic() < stop:
            k += 1
            bad = (cid * 1000 + k) % bad_every == 0
            comps, gold = make_batch(cid * 7919 + k, batch, bad)
            t0 = time.perf_counter()
            status, body = http("POST", base + "/score", {"completions": comps,
                                                          "columns": {"answer": gold}}, timeout=120)
            dt = time.perf_counter() - t0
            assert status == 200, body
            with lock:
                lat.append(dt)
                items[0] += len(body["rewards"])
                if not bad:
                    clean_lat.append(dt)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0

    def pct(xs, q):
        return statistics.quantiles(xs, n=100)[q - 1] if len(xs) >= 2 else (xs[0] if xs else 0)
    return {"clients": clients, "requests": len(lat), "items_per_s": items[0] / wall,
            "p50_ms": 1e3 * pct(lat, 50), "p99_ms": 1e3 * pct(lat, 99),
            "clean_p50_ms": 1e3 * pct(clean_lat, 50), "clean_p99_ms": 1e3 * pct(clean_lat, 99),
            "clean_over_timeout": sum(x > timeout for x in clean_lat),
            "clean_requests": len(clean_lat)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--bad-every", type=int, default=8, help="one request in N has a bad item")
    ap.add_argument("--max-burst-workers", type=int, default=None,
                    help="server's --max-burst-workers (default: the server's default)")
    ap.add_argument("--no-deprioritize", action="store_true",
                    help="server's --no-deprioritize (stragglers keep normal CPU priority)")
    a = ap.parse_args()
    extra = ([] if a.max_burst_workers is None else ["--max-burst-workers", str(a.max_burst_workers)]) \
        + (["--no-deprioritize"] if a.no_deprioritize else [])
    rows = []
    with reward_server("--workers", str(a.workers), "--timeout", str(a.timeout),
                       "--reward", "accuracy,format:0.5", *extra) as base:
        http("POST", base + "/score", {"completions": ["\\boxed{1}"] * 4,
                                       "columns": {"answer": ["1"] * 4}})           # warm-up
        for c in (int(x) for x in a.clients.split(",")):
            before = _timeouts(base)
            row = run_level(base, c, a.seconds, a.batch, a.bad_every, a.timeout)
            row["server_timeouts"] = _timeouts(base) - before
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print(f"\nworkers={a.workers} burst={a.max_burst_workers or 'default'} "
          f"deprioritize={'off' if a.no_deprioritize else 'on'} timeout={a.timeout:g}s batch={a.batch} "
          f"bad item in 1 of {a.bad_every} requests, {a.seconds:g} s per level\n")
    print("| clients | requests | items/s | p50 ms | p99 ms | clean p50 ms | clean p99 ms "
          "| clean > timeout | timeouts |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['clients']} | {r['requests']} | {r['items_per_s']:.0f} | {r['p50_ms']:.0f} "
              f"| {r['p99_ms']:.0f} | {r['clean_p50_ms']:.0f} | {r['clean_p99_ms']:.0f} "
              f"| {r['clean_over_timeout']}/{r['clean_requests']} | {r['server_timeouts']} |")


def _timeouts(base: str) -> int:
    _, text = http("GET", base + "/metrics")
    for line in text.splitlines():
        if line.startswith("mindrl_reward_timeouts_total "):
            return int(float(line.split()[1]))
    return 0


if __name__ == "__main__":
    main()
