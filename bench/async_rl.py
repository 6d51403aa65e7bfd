"""Step time and response tokens/s of one RL recipe run several ways, in one process, same model,
same prompts, long-tailed response lengths: sync, ``rollout.async_ahead=1`` (a sampler process
one step ahead), and ``rollout.mode=async_ray`` with 2 rollout workers at max_staleness 1, 2
and 4, and at 1 with partial rollouts (generations in flight at a weight push continue under
the new weights).

Lengths: every decode step ends each live row with probability 3.5 / max tokens (EOS forced,
otherwise suppressed): a geometric, long-tailed length (mean ~max/3.5, a few rows at the limit,
as :func:`trl_compare.mixed_lengths`) that has no memory, so a generation interrupted and
resumed draws its length from the same law as one that ran through. Every mode samples the
same law; the mean response length is printed beside each row.
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

from trl_compare import SIZES, make_prompts  # noqa: E402


def geometric_lengths(model, tokens: int, eos_id: int) -> None:
    """The decode loop's logits hook (``model.mindrl_logits_hook``): each live row ends at this
    step with probability 3.5 / ``tokens`` (EOS forced), else EOS is suppressed. Draws come from
    the engine's seeded torch stream."""
    import torch

    p = 3.5 / tokens

    def per_call(rows: int):
        def step(row_ids, t, scores):
            end = (torch.rand(len(row_ids)) < p).to(scores.device)
            scores = scores.clone()
            scores[:, eos_id] = -float("inf")
            forced = torch.full_like(scores, -float("inf"))
            forced[:, eos_id] = 0.0
            return torch.where(end[:, None], forced, scores)

        return step

    model.mindrl_logits_hook = per_call


MODES = {
    "sync": [],
    "async_ahead=1": ["rollout.async_ahead=1"],
    "async_ray k=1": ["rollout.mode=async_ray", "rollout.workers=2", "rollout.max_staleness=1"],
    "async_ray k=2": ["rollout.mode=async_ray", "rollout.workers=2", "rollout.max_staleness=2"],
    "async_ray k=4": ["rollout.mode=async_ray", "rollout.workers=2", "rollout.max_staleness=4"],
    "k=1 partial": ["rollout.mode=async_ray", "rollout.workers=2", "rollout.max_staleness=1",
                    "rollout.partial_rollouts=true"],
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
        "rollout.logprob_gap_warn=100",     # the forced EOS moves the engine's log-probs
        f"logging.output_dir={tmp / mode.replace(' ', '_')}", *MODES[mode]])
    from transformers import AutoTokenizer

    from mindrl.models.tiny import resolve_model_path

    t0 = time.perf_counter()
    eos = AutoTokenizer.from_pretrained(resolve_model_path(S["model"])).eos_token_id
    setup = functools.partial(geometric_lengths, tokens=S["tokens"], eos_id=eos)

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
    tok_stale = sum(r.get("rollout/token_staleness", r.get("rollout/staleness", 0.0))
                    for r in rows) / len(rows)
    return {"mode": mode, "step_s": step, "tokens_per_s": tok, "staleness": stale,
            "token_staleness": tok_stale,
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
          f"{'staleness':>11}{'per token':>11}{'resp len':>10}")
    for r in out:
        print(f"{r['mode']:<15}{r['step_s']:>9.3f}{r['step_s'] / base['step_s']:>8.2f}"
              f"{r['tokens_per_s']:>10.0f}{r['tokens_per_s'] / base['tokens_per_s']:>8.2f}"
              f"{r['staleness']:>11.2f}{r['token_staleness']:>11.2f}{r['resp_len']:>10.1f}")


if __name__ == "__main__":
    main()
