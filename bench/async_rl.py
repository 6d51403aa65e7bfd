"""Step time and response tokens/s of one RL recipe run four ways, in one process, same model,
same prompts, long-tailed response lengths (bench/trl_compare.py ``mixed_lengths``: most
responses short, a few at the limit; every mode samples the same lengths per step): sync,
``rollout.async_ahead=1`` (a sampler process one step ahead), and ``rollout.mode=async_ray``
with 2 rollout workers at max_staleness 1 and 2.
Ratios are against sync, measured in the same run (the machine's load drifts between runs).

    .venv/bin/python bench/async_rl.py --size tiny --steps 8 --warmup 2
"""
import argparse
import functools
import json
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from trl_compare import SIZES, length_hook, length_processor, make_prompts, mixed_lengths  # noqa: E402,E501



def cycled_lengths(model, rows: int, tokens: int, eos_id: int) -> None:
    """``model.generate`` ends its rows at the long-tailed :func:`mixed_lengths` of one step's
    ``rows`` rollouts, taken in turn across calls: a call over a whole step's batch and calls
    over one group at a time (a Ray worker's) sample the same lengths over a step."""
    from transformers import LogitsProcessorList

    targets, gen, state = mixed_lengths(rows, tokens), model.generate, {"next": 0}

    def take(count):
        first = state["next"]
        state["next"] = (first + count) % rows
        return [targets[(first + b) % rows] for b in range(count)]

    model.mindrl_logits_hook = length_hook(take, eos_id)

    def generate(*args, **kw):
        ids = kw.get("input_ids", args[0] if args else None)
        first = state["next"]
        mine = [targets[(first + b) % rows] for b in range(ids.shape[0])]
        state["next"] = (first + ids.shape[0]) % rows
        lp = LogitsProcessorList(list(kw.pop("logits_processor", None) or []) +
                                 [length_processor(mine, eos_id)()])
        return gen(*args, logits_processor=lp, **kw)

    model.generate = generate


MODES = {
    "sync": [],
    "async_ahead=1": ["rollout.async_ahead=1"],
    "async_ray k=1": ["rollout.mode=async_ray", "rollout.workers=2", "rollout.max_staleness=1"],
    "async_ray k=2": ["rollout.mode=async_ray", "rollout.workers=2", "rollout.max_staleness=2"],
}


def run(mode: str, size: str, steps: int, warmup: int, tmp: pathlib.Path):
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    S = SIZES[size]
    cfg = load_config(None, [
        f"model.path={S['model']}", "model.chat_template=none", "model.dtype=float32",
        f"data.train_file={tmp / 'p.jsonl'}", "data.max_val_samples=0",
        f"rollout.n={S['n']}", f"rollout.max_new_tokens={S['tokens']}",
        f"train.steps={steps + warmup}", f"train.prompts_per_step={S['prompts']}",
        "train.micro_batch_size=8", "train.lr=1e-5", "train.threads=1", "reward.num_workers=0",
        "reward.functions=[{name: 'trl_compare:bench_reward'}]", "validation.every=0",
        "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
        "checkpoint.resume=false", "checkpoint.save_final=false",
        f"logging.output_dir={tmp / mode.replace(' ', '_')}", *MODES[mode]])
    from transformers import AutoTokenizer

    from mindrl.models.tiny import resolve_model_path

    t0 = time.perf_counter()
    eos = AutoTokenizer.from_pretrained(resolve_model_path(S["model"])).eos_token_id
    setup = functools.partial(cycled_lengths, rows=S["prompts"] * S["n"], tokens=S["tokens"],
                              eos_id=eos)

    class Bench(RLTrainer):
        rollout_worker_setup = setup            # async_ray: each worker's model

    tr = Bench(cfg)
    if tr.ahead is not None and getattr(tr.ahead, "child_setup", "n/a") is None:
        tr.ahead.child_setup = setup            # async_ahead: the sampler process's model
    elif tr.ahead is None:
        setup(tr.engine.model)
    try:
        tr.fit()
    finally:
        tr.close()
    setup_s = time.perf_counter() - t0
    rows = [json.loads(x) for x in (tmp / mode.replace(" ", "_") / "metrics.jsonl")
            .read_text().splitlines()][warmup:]
    step = sum(r["time/step"] for r in rows) / len(rows)
    tok = sum(r["throughput/tokens_per_s"] * r["time/step"] for r in rows) / \
        sum(r["time/step"] for r in rows)
    stale = sum(r.get("rollout/staleness", 0.0) for r in rows) / len(rows)
    return {"mode": mode, "step_s": step, "tokens_per_s": tok, "staleness": stale,
            "resp_len": sum(r["response_length/mean"] for r in rows) / len(rows),
            "total_s": setup_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--modes", default=",".join(MODES))
    a = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp())
    (tmp / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make_prompts(256)))
    out = [run(m, a.size, a.steps, a.warmup, tmp) for m in a.modes.split(",")]
    base = next((r for r in out if r["mode"] == "sync"), out[0])
    print(f"\n{a.size}: {SIZES[a.size]}, {a.steps} steps after {a.warmup} warm-up, "
          "long-tailed response lengths")
    print(f"{'mode':<15}{'step s':>9}{'x sync':>8}{'tokens/s':>10}{'x sync':>8}"
          f"{'staleness':>11}{'resp len':>10}")
    for r in out:
        print(f"{r['mode']:<15}{r['step_s']:>9.3f}{r['step_s'] / base['step_s']:>8.2f}"
              f"{r['tokens_per_s']:>10.0f}{r['tokens_per_s'] / base['tokens_per_s']:>8.2f}"
              f"{r['staleness']:>11.2f}{r['resp_len']:>10.1f}")


if __name__ == "__main__":
    main()
