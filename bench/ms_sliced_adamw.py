"""The MindSpore AdamW update slice by slice: in place in host memory against compiled slices,
time and memory.

One process: ``--values`` float32 parameters in 20 matrices of 1,000 columns, the flat AdamW
state of :class:`mindrl.backends.mindspore.optim.AdamW` (gradient, two moments) cut into slices
of ``--slice-mib`` MiB, then ``--repeats`` updates each way, alternating (the in-place host
update first, the CPU default, or ``--compiled-first``): ``host`` updates the vectors' own
memory in place with NumPy (``optim.host_adamw``), ``compiled`` runs each slice's arithmetic as
one compiled call and writes its outputs back (the path where the vectors have no host memory).
Per update: seconds, and the peak resident memory during it (VmHWM, reset
just before) minus the resident memory before it, in float32 vector sizes (``--values`` x 4 B).
The first call of each way is where the memory pool grows.

    python bench/ms_sliced_adamw.py                          # 100M values, 16 MiB slices
    python bench/ms_sliced_adamw.py --values 25000000 --repeats 2
    python bench/ms_sliced_adamw.py --values 40000000 --arithmetic   # + the arithmetic alone

``--arithmetic``: after each compiled update, the compiled slice arithmetic alone, one call per
slice on stand-in inputs of the slice's length (no copies in or out of the flat vectors).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--values", type=int, default=100_000_000)
    ap.add_argument("--slice-mib", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compiled-first", action="store_true")
    ap.add_argument("--arithmetic", action="store_true",
                    help="also time the compiled slice arithmetic alone")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    from mindspore import Parameter, Tensor

    from mindrl.backends.mindspore.optim import AdamW, adamw_scalars
    from mindrl.backends.mindspore.weights import write_param

    rows = max(1, a.values // 20 // 1000)
    ps = [Parameter(Tensor(np.full((rows, 1000), 0.5, np.float32)), name=f"p{i}")
          for i in range(20)]
    n = 20 * rows * 1000
    # AdamW slices at a quarter of its threshold: the threshold is 4 x the slice size
    opt = AdamW(ps, weight_decay=0.01, slice_bytes=4 * (a.slice_mib << 20))
    write_param(opt.grad_flat, np.full(n, 0.01, np.float32))
    float(opt.grad_flat[0:1].asnumpy()[0])          # written into place before measuring
    lengths = sorted({hi - lo for lo, hi, _ in opt._slices})
    print(f"{n / 1e6:.0f}M float32 values, {len(opt._slices)} slices of up to "
          f"{lengths[-1] * 4 / 2 ** 20:.1f} MiB ({len(lengths)} lengths)")
    order = (False, True) if a.compiled_first else (True, False)
    for rep in range(a.repeats):
        for host in order:
            Path("/proc/self/clear_refs").write_text("5")
            before = _rss("VmRSS")
            t0 = time.perf_counter()
            opt._apply_sliced(*adamw_scalars(rep + 1, 0.9, 0.999, 1e-3, 1.0, 0.5), host=host)
            float(ps[-1][0:1].asnumpy()[0, 0])    # wait for the last write
            print(f"update {rep + 1} {'host' if host else 'compiled':8s} "
                  f"{time.perf_counter() - t0:6.2f} s   peak +{(_rss('VmHWM') - before) / (4 * n):.2f} "
                  "vectors", flush=True)
            if a.arithmetic and not host:
                x = Tensor(np.full(lengths[-1], 0.5, np.float32))
                scalars = adamw_scalars(rep + 1, 0.9, 0.999, 1e-3, 1.0, 0.5)
                t0 = time.perf_counter()
                for _ in opt._slices:
                    out = opt._slice_update(x, x, x, x, *scalars)
                float(out[0][0:1].asnumpy()[0])
                print(f"update {rep + 1} the compiled arithmetic alone "
                      f"{time.perf_counter() - t0:6.2f} s", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
