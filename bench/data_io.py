"""Reading large data files: time to the first example and peak memory, mindrl vs full reads.

Writes a verl-shaped file of N rows (default 1,000,000; data_source, prompt = [user turn],
ability, reward_model {style, ground_truth}, extra_info {split, index}) as parquet (row groups
of 64k rows) and as JSONL under /tmp, then runs each reader in a fresh subprocess and reports
its wall time and peak RSS (``VmHWM`` of /proc/self/status, the high-water mark of that process's
own memory map; ``getrusage``'s ``ru_maxrss`` would carry over the parent's size across fork and
exec), interpreter and imports included:

``mindrl first``   ``mindrl.data.formats.head(path, "rl", 1)``: what ``mindrl data inspect``
                   reads (one parquet batch / one JSONL line)
``list first``     the eager path (training before FileStream; still used for ``.json``):
                   ``load_file(path, "rl")`` maps every row into a list, then
                   ``ListStream(rows, 0).take(1)``
``list 10k``       the same, then 10,000 rows taken, 100 at a time (a step's batch)
``stream first``   ``index_file(path, "rl")`` + ``FileStream(rows, 0).take(1)`` (shuffled):
                   what training does now for ``.jsonl``/``.parquet`` (JSONL: one pass to index
                   the line offsets; parquet: the footer, then the first window's row groups)
``stream 10k``     the same, then 10,000 rows taken 100 at a time (parquet: 64k-row groups,
                   windows of ``DEFAULT_WINDOW_ROWS`` = 262,144 rows: 4 row groups decoded)
``stream epoch``   the same, then a whole epoch (N rows, 1,000 at a time), every row seen
                   once: the memory bound over an epoch (the parquet cache turns over)
``mindrl convert`` ``mindrl.data.convert.convert(path, out.jsonl, to="mindrl")``: streaming
``pyarrow full``   ``pq.read_table(path).to_pylist()`` / ``pyarrow.json.read_json``, as a
                   reader that loads the whole file does (pandas is not installed here)

Usage: python bench/data_io.py [--rows 1000000] [--keep] [--readers 'stream first,stream 10k']
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
TMP = Path("/tmp/mindrl_bench_data_io")

# 10,000 rows in 100 takes of 100 prompts (a training step's batch), all distinct
TAKE_10K = "ids = {r['id'] for _ in range(100) for r in s.take(100)}; assert len(ids) == 10_000"
READERS = {
    "mindrl first": "from mindrl.data.formats import head; p, rows = head(PATH, 'rl', 1); "
                    "assert rows[0][2]['answer']",
    "list first": "from mindrl.data.formats import load_file; "
                  "from mindrl.trainer.prompts import ListStream; "
                  "p, rows = load_file(PATH, 'rl'); assert len(rows) == N; "
                  "assert ListStream(rows, 0).take(1)[0]['answer']",
    "list 10k": "from mindrl.data.formats import load_file; "
                "from mindrl.trainer.prompts import ListStream; "
                "p, rows = load_file(PATH, 'rl'); s = ListStream(rows, 0); " + TAKE_10K,
    "stream first": "from mindrl.data.formats import index_file; "
                    "from mindrl.trainer.prompts import FileStream; "
                    "p, rows = index_file(PATH, 'rl'); assert len(rows) == N; "
                    "assert FileStream(rows, 0).take(1)[0]['answer']",
    "stream 10k": "from mindrl.data.formats import index_file; "
                  "from mindrl.trainer.prompts import FileStream; "
                  "p, rows = index_file(PATH, 'rl'); s = FileStream(rows, 0); " + TAKE_10K,
    "stream epoch": "import numpy as np; from mindrl.data.formats import index_file; "
                    "from mindrl.trainer.prompts import FileStream; "
                    "p, rows = index_file(PATH, 'rl'); s = FileStream(rows, 0); "
                    "seen = np.zeros(N, bool)\nfor _ in range(N // 1000):\n"
                    "    seen[[int(r['id']) for r in s.take(1000)]] = True\nassert seen.all()",
    "mindrl convert": "from mindrl.data.convert import convert; p, n = convert(PATH, OUT, "
                      "to='mindrl'); assert n == N",
    "pyarrow full": "import pyarrow.parquet as pq, pyarrow.json as pj; "
                    "t = pq.read_table(PATH) if PATH.endswith('.parquet') else "
                    "pj.read_json(PATH); rows = t.to_pylist(); assert len(rows) == N",
}


def write_files(n: int) -> tuple:
    import pyarrow as pa
    import pyarrow.parquet as pq

    TMP.mkdir(parents=True, exist_ok=True)
    pq_path, jl_path = TMP / f"verl_{n}.parquet", TMP / f"verl_{n}.jsonl"
    if pq_path.exists() and jl_path.exists():
        return pq_path, jl_path
    chunk = 65_536
    writer = None
    with jl_path.open("w") as jf:
        for start in range(0, n, chunk):
            rows = [{"data_source": "openai/gsm8k",
                     "prompt": [{"role": "user", "content": f"Problem {i}: what is {i} + 17? "
                                 "Let's think step by step and output the final answer after "
                                 "\"####\"."}],
                     "ability": "math",
                     "reward_model": {"style": "rule", "ground_truth": str(i + 17)},
                     "extra_info": {"split": "train", "index": i}}
                    for i in range(start, min(n, start + chunk))]
            table = pa.Table.from_pylist(rows)
            if writer is None:
                writer = pq.ParquetWriter(pq_path, table.schema)
            writer.write_table(table)
            jf.write("".join(json.dumps(r) + "\n" for r in rows))
    writer.close()
    return pq_path, jl_path


def measure(code: str, path: Path, n: int) -> tuple:
    """(seconds, peak RSS MiB) of ``code`` in a fresh interpreter."""
    out = TMP / "converted.jsonl"
    prog = (f"import time; PATH = {str(path)!r}; N = {n}; OUT = {str(out)!r}\n"
            f"t0 = time.perf_counter()\n{code}\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "print(time.perf_counter() - t0, int(hwm.split()[1]) / 1024)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    sec, mib = res.stdout.split()[-2:]
    return float(sec), float(mib)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the files in /tmp")
    ap.add_argument("--readers", default="", help="comma-separated subset of: "
                    + ", ".join(READERS) + " (pyarrow full is always run: the ratios use it)")
    args = ap.parse_args()
    names = [x.strip() for x in args.readers.split(",") if x.strip()] or list(READERS)
    unknown = sorted(set(names) - set(READERS))
    if unknown:
        ap.error(f"unknown reader(s) {', '.join(unknown)}; valid: {', '.join(READERS)}")
    names = [n for n in READERS if n in names or n == "pyarrow full"]
    t0 = time.perf_counter()
    files = write_files(args.rows)
    print(f"wrote {args.rows:,} verl rows: " + ", ".join(
        f"{p.name} {p.stat().st_size / 2**20:.0f} MiB" for p in files)
        + f" ({time.perf_counter() - t0:.0f} s)")
    print(f"{'file':8s} {'reader':15s} {'seconds':>9s} {'peak RSS MiB':>13s} "
          f"{'time / pyarrow':>15s} {'RSS / pyarrow':>14s}")
    for path in files:
        results = {name: measure(READERS[name], path, args.rows) for name in names}
        base = results["pyarrow full"]
        for name, (sec, mib) in results.items():
            print(f"{path.suffix[1:]:8s} {name:15s} {sec:9.2f} {mib:13.0f} "
                  f"{sec / base[0]:15.3f} {mib / base[1]:14.2f}")
    if not args.keep:
        for p in TMP.iterdir():
            p.unlink()


if __name__ == "__main__":
    main()
