"""Sandbox start-up cost: ``python -m mindrl.tools.throughput [--calls N] [--workers W]`` runs
``print(1)`` N times on a pool of W workers under each available isolation and prints calls/s."""

from __future__ import annotations

import argparse
import time

from mindrl.tools.sandbox import Sandbox, SandboxLimits, SandboxPool, available


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    for iso in ("bwrap", "unshare"):
        if not available(iso):
            print(f"{iso}: not available")
            continue
        with SandboxPool(Sandbox(SandboxLimits(timeout_s=30), isolation=iso),
                         workers=args.workers) as pool:
            pool.run("print(1)")                                     # warm the page cache
            t0 = time.perf_counter()
            futs = [pool.submit("print(1)") for _ in range(args.calls)]
            ok = sum(f.result().verdict == "ok" for f in futs)
            dt = time.perf_counter() - t0
        print(f"{iso}: {ok}/{args.calls} ok, {args.calls / dt:.1f} calls/s with "
              f"{args.workers} workers ({1000 * dt / args.calls:.0f} ms per call amortised)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
