"""How an RL step's cost grows with the work: step time and peak memory as the response length
and the group size grow, per backend, with the slope fitted.

    .venv/bin/python bench/scaling.py                               # both backends, full grid
    .venv/bin/python bench/scaling.py --backends torch --lengths 64,128 --groups 4,8 --steps 3
    .venv/bin/python bench/scaling.py --lengths 64,128,256,512,1024 --groups 4 --breakdown

Grid: response length ``--lengths`` (group size fixed at the first of ``--groups``) and group
size ``--groups`` (length fixed at the first of ``--lengths``); ``--prompts`` prompts per step.
Every response is exactly the length asked (EOS suppressed: torch through ``min_new_tokens``,
MindSpore by sampling without stop ids), so the work is known: rows x length tokens. Each point
runs in its own one-thread subprocess (the builtin tiny model, float32, the native engine,
``train.recompute_old_logp=false``, ``train.padding_free`` on for torch, ``logging.profile``);
the median of ``--steps`` measured steps after ``--warmup`` steps (2 by default: MindSpore
compiles in them) is reported with the worker's peak RSS (``ru_maxrss``: the process high-water mark, model and
framework included).

``--repeats N`` runs each point in N processes and pools their measured steps. ``--breakdown``
adds, along the length axis, each phase's time and the attention parts of generation and the
update against the rest, with analytic attention FLOPs (:mod:`bench.phase_profile`): torch
profiles one extra step (not counted in the times) and times its decode step against the
cache's length; MindSpore times its compiled decode step per cache size and its sampler's
``generate`` per length (both in the first length's worker). ``--from-json FILE`` prints the
tables of an earlier ``--json`` run.

Slope: a least-squares fit of log(step time) on log(response tokens per step) over each axis;
1.0 = cost grows in proportion to the work, below 1 = fixed costs still dominate, above 1 =
super-linear (attention, or padding).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

from bench.harness import (QUIET_ONE_THREAD_ENV, emit, pool_runs, run_worker,  # noqa: E402
                           torch_one_thread)


def _worker(a) -> None:
    torch_one_thread()
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    work = Path(a.workdir)
    rows = [{"problem": f"Compute {100 + i} + {200 + i}.", "answer": str(300 + 2 * i)}
            for i in range(a.prompts * (a.warmup + a.steps + 2))]
    data = work / "prompts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    over = [
        "model.path=builtin:tiny", "model.chat_template=none", "model.dtype=float32",
        f"backend={a.backend}", f"data.train_file={data}", "data.shuffle=false",
        "data.max_val_samples=0", "rollout.engine=native", f"rollout.n={a.group}",
        f"rollout.max_new_tokens={a.length}", "rollout.temperature=1.0",
        f"train.steps={a.warmup + a.steps + (a.breakdown and a.backend == 'torch')}", f"train.prompts_per_step={a.prompts}",
        f"train.micro_batch_size={min(8, a.prompts * a.group)}", "train.threads=1",
        "train.recompute_old_logp=false", "algorithm.kl.coef=0.0", "reward.num_workers=0",
        "reward.functions=[{name: 'trl_compare:bench_reward'}]", "logging.profile=true",
        "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
        "checkpoint.save_final=false", "checkpoint.resume=false",
        f"logging.output_dir={work / 'run'}",
    ] + (["train.padding_free=true"] if a.backend == "torch" else [])
    tr = RLTrainer(load_config(None, over))
    if a.backend == "torch":
        from trl_compare import wrap_generate

        wrap_generate(tr.engine.model, a.length, False, tr.tokenizer.eos_token_id)
    else:                                     # the MindSpore sampler stops only on these ids
        tr.stop_ids = ()
        tr.engine.eos_ids = ()
    ends, cpu_ends, phases = [], [], []
    original = RLTrainer.run_step
    extra = {}
    if a.breakdown and a.backend == "torch":
        from bench.phase_profile import install_torch_labels

        install_torch_labels(tr)
    if a.breakdown:                                   # the prompt length, for the FLOP count
        gen = tr.engine.generate

        def generate(prompt_ids, *args, **kw):
            extra["prompt_len"] = max(len(p) for p in prompt_ids)
            return gen(prompt_ids, *args, **kw)

        tr.engine.generate = generate

    def timed(self):
        if a.breakdown and a.backend == "torch" and len(ends) == a.warmup + a.steps:
            from bench.phase_profile import profile_torch_step   # the extra, unmeasured step

            m, extra["op_seconds"] = profile_torch_step(lambda: original(self))
            return m
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        m = original(self)
        ends.append(time.perf_counter())
        cpu_ends.append(time.process_time())
        ru = resource.getrusage(resource.RUSAGE_SELF)
        phases.append({k: float(v) for k, v in m.items()
                       if k.startswith(("time/", "profile/", "response_length/"))})
        # what a slow step had more of: waits for the CPU (involuntary switches), page faults,
        # compiled shapes so far (MindSpore's sampler and backend)
        phases[-1].update({"ru/nivcsw": ru.ru_nivcsw - ru0.ru_nivcsw,
                           "ru/nvcsw": ru.ru_nvcsw - ru0.ru_nvcsw,
                           "ru/minflt": ru.ru_minflt - ru0.ru_minflt,
                           "ru/cpu": (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
                           "compiled": float(sum(getattr(tr.engine, "compile_counts", {}).values())
                                             + sum(getattr(tr.backend, "compile_counts",
                                                           {}).values()))})
        return m

    RLTrainer.run_step = timed
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        tr.fit()
        if a.breakdown and a.backend == "torch" and a.decode_lengths:
            from bench.phase_profile import time_torch_decode

            extra["decode_context_ms"] = time_torch_decode(
                tr.engine.model, extra["prompt_len"], a.prompts * a.group, a.decode_lengths)
        if a.breakdown and a.backend == "mindspore" and a.decode_lengths:
            from bench.phase_profile import time_mindspore_decode
            from mindrl.backends.mindspore.buckets import default_buckets
            from mindrl.types import bucket

            P = bucket(extra["prompt_len"], tr.backend.prompt_buckets)
            slots = [P + bucket(L, default_buckets(L)) for L in a.decode_lengths]
            extra["decode_slots_ms"] = time_mindspore_decode(tr, slots, a.prompts * a.group)
            from bench.phase_profile import time_mindspore_generate

            extra["generate_ms"] = time_mindspore_generate(
                tr, extra["prompt_len"], a.prompts * a.group, a.decode_lengths)
    finally:
        tr.close()
    steps = [e - s for s, e in zip([start] + ends[:-1], ends)]
    cpu = [e - s for s, e in zip([cpu_start] + cpu_ends[:-1], cpu_ends)]
    threads = []          # per thread: name, CPU s, involuntary switches (the whole run)
    for task in sorted(Path("/proc/self/task").iterdir()) if Path("/proc/self/task").is_dir() \
            else []:
        try:
            stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
            status = dict(line.split(":", 1) for line in (task / "status").read_text()
                          .splitlines() if ":" in line)
            threads.append(((task / "comm").read_text().strip(),
                            (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"),
                            int(status["nonvoluntary_ctxt_switches"])))
        except (OSError, KeyError, IndexError, ValueError):
            pass
    extra["threads"] = threads
    emit({"step_times": steps, "cpu_times": cpu, "phases": phases, "warmup": a.warmup,
          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, **extra})


def slope(xs, ys) -> float:
    """Least-squares slope of log(y) on log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / den if den else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default="torch,mindspore")
    ap.add_argument("--lengths", default="64,128,256,512,1024")
    ap.add_argument("--groups", default="4,8,16,32")
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs (processes) per point, their measured steps pooled")
    ap.add_argument("--breakdown", action="store_true",
                    help="per phase and attention vs the rest: a profiled extra step (torch), "
                    "the compiled decode step timed per cache size (MindSpore), analytic FLOPs")
    ap.add_argument("--json", default="")
    ap.add_argument("--from-json", default="",
                    help="print the tables of a --json file written earlier; run nothing")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="torch", help=argparse.SUPPRESS)
    ap.add_argument("--length", type=int, default=64, help=argparse.SUPPRESS)
    ap.add_argument("--group", type=int, default=4, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", default="", help=argparse.SUPPRESS)
    ap.add_argument("--decode-lengths", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.decode_lengths = [int(x) for x in a.decode_lengths.split(",") if x]
    if a.worker:
        _worker(a)
        return 0
    if a.from_json:
        results = json.loads(Path(a.from_json).read_text())
        print(render(results, a))
        if any("phases" in r for r in results) and a.breakdown:
            from bench.phase_profile import render_breakdown

            print()
            print(render_breakdown(results, a.prompts))
        return 0
    lengths = [int(x) for x in a.lengths.split(",")]
    groups = [int(x) for x in a.groups.split(",")]
    points = [("length", L, groups[0]) for L in lengths] + \
        [("group", lengths[0], G) for G in groups[1:]]
    results = []
    with tempfile.TemporaryDirectory(prefix="mindrl_scaling_") as tmp:
        # point by point, each backend in turn: the backends of a row run minutes apart at
        # most, so a shared machine's changing load hits both alike
        for axis, L, G in points:
            for backend in a.backends.split(","):
                runs = []
                for rep in range(a.repeats):
                    work = Path(tmp) / f"{backend}_{L}_{G}_{rep}"
                    work.mkdir()
                    cmd = [sys.executable, __file__, "--worker", "--backend", backend,
                           "--length", str(L), "--group", str(G), "--prompts", str(a.prompts),
                           "--steps", str(a.steps), "--warmup", str(a.warmup), "--workdir",
                           str(work)]
                    if a.breakdown:
                        cmd.append("--breakdown")
                        if axis == "length" and L == lengths[0] and rep == 0:
                            # the decode step timed at every length's cache size
                            cmd += ["--decode-lengths", ",".join(map(str, lengths))]
                    print(f"[scaling] {backend} length {L} group {G} run {rep + 1} ...",
                          file=sys.stderr, flush=True)
                    runs.append(run_worker(cmd, what=f"{backend} L={L} G={G}", cwd=work,
                                           timeout=a.timeout, env=QUIET_ONE_THREAD_ENV,
                                           repo=REPO))
                s = pool_runs(runs)
                res = {"backend": backend, "axis": axis, "length": L, "group": G,
                       "tokens": a.prompts * G * L, "median_s": s["median"], "min_s": s["min"],
                       "max_s": s["max"], "cpu_s": s["cpu_median"],
                       "peak_rss_mb": s["peak_rss_mb"], "phases": s["phases"],
                       "loads": s["loads"]}
                for key in ("prompt_len", "op_seconds", "decode_slots_ms",
                            "decode_context_ms", "generate_ms"):
                    got = [r[key] for r in runs if key in r]
                    if got:
                        res[key] = got if key == "op_seconds" else got[0]
                res["runs"] = [{"step_times": r["step_times"], "cpu_times": r["cpu_times"],
                                "steps": [{k: v for k, v in p.items()
                                           if k.startswith(("ru/", "compiled", "time/"))}
                                          for p in r["phases"]],
                                "threads": r.get("threads", []), "warmup": r["warmup"]}
                               for r in runs]
                results.append(res)
                print(f"[scaling]   {s['median']:.3f} s/step, peak {s['peak_rss_mb']:.0f} MB",
                      file=sys.stderr, flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    print(render(results, a))
    if a.breakdown:
        from bench.phase_profile import render_breakdown

        print()
        print(render_breakdown(results, a.prompts))
    return 0


def render(results, a) -> str:
    lines = [f"Median s/step over {a.steps} steps after {a.warmup} warm-up, {a.prompts} prompts "
             "per step, tiny model, 1 thread; process CPU s/step (all threads); peak RSS of the "
             "worker process.", "",
             "| backend | response length | group size | response tokens/step | s/step (min-max) "
             "| CPU s/step | ms per 1k tokens | generation share | overhead | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    backends = list(dict.fromkeys(r["backend"] for r in results))
    for r in sorted(results, key=lambda r: backends.index(r["backend"])):
        ph = r["phases"]
        gen = ph.get("time/rollout", 0.0) / max(ph.get("time/step", 1e-9), 1e-9)
        lines.append(f"| {r['backend']} | {r['length']} | {r['group']} | {r['tokens']} | "
                     f"{r['median_s']:.3f} ({r['min_s']:.3f}-{r['max_s']:.3f}) | "
                     f"{r.get('cpu_s', float('nan')):.3f} | "
                     f"{1e3 * r['median_s'] / (r['tokens'] / 1e3):.1f} | {100 * gen:.0f}% | "
                     f"{100 * ph.get('profile/overhead_fraction', float('nan')):.1f}% | "
                     f"{r['peak_rss_mb']:.0f} |")
    lines.append("")
    if len(backends) == 2:
        base, other = backends
        by = {(r["backend"], r["length"], r["group"]): r for r in results}
        for r in results:
            o = by.get((other, r["length"], r["group"]))
            if r["backend"] == base and o is not None:
                lines.append(f"- {other}/{base}, length {r['length']} group {r['group']}: "
                             f"{o['median_s'] / r['median_s']:.2f}x wall, "
                             f"{o.get('cpu_s', 0) / max(r.get('cpu_s', 0), 1e-9):.2f}x CPU")
    for backend in backends:
        for axis, key in (("length", "length"), ("group", "group")):
            pts = [r for r in results if r["backend"] == backend and
                   (r["axis"] == axis or (r["axis"] == "length" and
                                          r["length"] == results[0]["length"]))]
            pts = {r[key]: r for r in pts}.values()
            if len(pts) > 1:
                pts = sorted(pts, key=lambda r: r["tokens"])
                lines.append(f"- {backend}, {axis} axis: log-log slope of step time on work "
                             f"{slope([r['tokens'] for r in pts], [r['median_s'] for r in pts]):.2f}"
                             f" ({pts[0]['tokens']} -> {pts[-1]['tokens']} tokens: "
                             f"{pts[-1]['median_s'] / pts[0]['median_s']:.1f}x time for "
                             f"{pts[-1]['tokens'] / pts[0]['tokens']:.0f}x work)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
