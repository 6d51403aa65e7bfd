"""mindrl vs TRL GRPOTrainer: median RL step time on the same model, prompts and shapes (CPU).

    .venv/bin/python bench/trl_compare.py              # tiny + small: mindrl, TRL, mindrl+vLLM
    .venv/bin/python bench/trl_compare.py --sizes tiny --no-vllm --steps 5 --warmup 2
    .venv/bin/python bench/trl_compare.py --profile runs/bench_prof   # + cProfile of each side
    # mixed response lengths, per-phase profile, a padding-free variant beside plain mindrl:
    .venv/bin/python bench/trl_compare.py --no-vllm --mixed --set logging.profile=true \\
        --variant packed:train.padding_free=true \\
        --variant sorted:train.max_tokens_per_micro_batch=1024
    # rollout one step ahead (a child process samples the next batch during the update):
    .venv/bin/python bench/trl_compare.py --no-vllm --mixed --set logging.profile=true \\
        --variant async:rollout.async_ahead=1 \\
        --variant async_packed:rollout.async_ahead=1,train.padding_free=true
    # a 50 ms-per-item reward, scored after generation vs while generation runs:
    .venv/bin/python bench/trl_compare.py --sizes tiny --no-trl --mixed --reward-workers 4 \\
        --variant slow:bench.reward_ms=50 \\
        --variant slow_overlap:bench.reward_ms=50,reward.overlap_groups=true

TRL is NOT a mindrl dependency. It lives in ``bench/.trl_pkgs`` (kept out of the project venv)::

    .venv/bin/pip install --target bench/.trl_pkgs --no-deps trl==1.16.0 accelerate datasets \\
        pandas pyarrow==24.0.0 xxhash multiprocess python-dateutil tzdata

(``--no-deps``, so torch / transformers / numpy are the venv's own and nothing in the venv
changes; huggingface_hub, dill, fsspec, psutil, jinja2, pyyaml come from the venv.)

What is held equal (each side runs in its own subprocess, OMP_NUM_THREADS=1 and
``torch.set_num_threads(1)``):

* model: ``builtin:tiny`` (hidden 64, 2 layers) or ``builtin:small`` (hidden 256, 4 layers),
  float32, no gradient checkpointing, no reference model (beta / kl.coef = 0);
* prompts: the same list in the same order (equal token length: no padding on either side),
  8 per step, n samples each, temperature 1.0, top_p 1, no top_k;
* response length: exactly ``max_new_tokens`` for every sample on both sides. The
  reward does not depend on EOS, so EOS is suppressed the same way on both: HF
  ``min_new_tokens = max_new_tokens``, set by the same wrapper around each side's
  ``model.generate`` (:func:`wrap_generate`; mindrl vLLM: ``min_tokens = max_tokens``). With
  ``--mixed`` the wrapper instead ends row b of every generate call at
  ``mixed_lengths(...)[b]`` tokens (long-tailed: mean ~8 of 32, ~28 of 128) with a logits
  processor that forces EOS there, identically on both sides (native engines only). Engine
  log-probs come from raw logits, so this changes only which token is sampled, never a
  log-prob the loss sees;
* reward: a cheap text hash in [0, 1) (``bench_reward``), in-process on both sides
  (mindrl ``reward.num_workers=0``): non-zero advantages, no grading cost;
* update: one AdamW step per rollout batch (TRL ``num_iterations=1``, ``steps_per_generation``
  = gradient_accumulation_steps; mindrl ``ppo_epochs=1``, ``mini_batch_size=0``), micro-batches
  of 8 rollouts (TRL ``per_device_train_batch_size=8`` x ``gradient_accumulation_steps``),
  same lr (constant), betas, eps, weight decay 0, grad clip 1.0, clip eps 0.2, token-mean loss;
* strict on-policy fast path on both: TRL with num_iterations=1 skips the old-log-prob
  forward; mindrl with ``train.recompute_old_logp=false`` does too (ratio = exp(logp - sg(logp))).

Step time = wall time between consecutive step ends (TRL: ``on_step_end`` callback; mindrl:
end of ``run_step``), so each side's own logging is inside; the first ``--warmup`` steps are
dropped; the table shows the median (and min-max) of the rest, pooled over ``--repeats``
interleaved runs. It also shows the median CPU seconds per step (``time.process_time`` of
the one-thread process): on a shared machine wall time mostly measures the other processes'
load, CPU time much less so; the two agree on an idle machine. mindrl's per-phase times are
its own ``time/*`` metrics; TRL's are wall-clock wrappers around its methods (see _trl_worker).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TRL_DIR = Path(os.environ.get("MINDRL_BENCH_TRL_DIR", HERE / ".trl_pkgs"))   # TRL lives here
# bench/ holds a rewards.py that would shadow the `rewards` package: the repository goes first,
# bench/ last (so that 'trl_compare:bench_reward' still imports for mindrl's reward registry).
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

# The timing harness every bench shares (bench/harness.py).
from bench.harness import (QUIET_ONE_THREAD_ENV, Profile, emit, loadavg,  # noqa: E402
                           pool_runs as summarize, run_worker, torch_one_thread)

SIZES = {  # model, prompts per step, samples per prompt, response tokens
    "tiny": {"model": "builtin:tiny", "prompts": 8, "n": 4, "tokens": 32},
    "small": {"model": "builtin:small", "prompts": 8, "n": 8, "tokens": 128},
}
MINDRL_PHASES = ("time/rollout", "time/reward", "time/old_logprobs", "time/ref_logprobs",
                 "time/update", "time/weight_sync")
TRL_PHASES = ("time/rollout", "time/reward", "time/score_other", "time/update_fwd_bwd",
              "time/optimizer_and_rest")
MICRO = 8          # rollouts per forward/backward on both sides
LR = 1e-5

TRL_MISSING = f"""TRL is not installed for the benchmark. It is kept out of the project venv:
install it into {TRL_DIR} (nothing in .venv changes; run from the repository root):

    .venv/bin/pip install --target {TRL_DIR} --no-deps trl==1.16.0 accelerate datasets \\
        pandas pyarrow==24.0.0 xxhash multiprocess python-dateutil tzdata

--no-deps keeps torch / transformers / numpy the venv's own; the remaining TRL/datasets
dependencies (huggingface_hub, dill, fsspec, psutil, jinja2, pyyaml) come from the venv."""


# --------------------------------------------------------------------------- shared pieces
def bench_reward(completions, **_):
    """A reward that costs nothing and does not depend on EOS: a hash of the text in [0, 1)."""
    return [(zlib.crc32(str(c).encode()) % 1000) / 1000.0 for c in completions]


def slow_bench_reward(completions, **_):
    """:func:`bench_reward` after sleeping ``MINDRL_BENCH_REWARD_MS`` ms per item (a grader's
    cost that does not use the CPU: what overlap can hide)."""
    time.sleep(len(completions) * float(os.environ.get("MINDRL_BENCH_REWARD_MS", "0")) / 1e3)
    return bench_reward(completions)


def mixed_lengths(batch: int, tokens: int):
    """Long-tailed response lengths (1..tokens) for the rows of a generate call: most short, a
    few at the limit, as in RL on reasoning tasks. The same list on both sides."""
    import random

    rng = random.Random(1234)
    return [max(1, min(tokens, int(round(tokens * rng.random() ** 2.5)))) for _ in range(batch)]


def _force(want, t, scores, eos_id):
    """Scores of rows that must end at ``want`` tokens, at response position ``t``: EOS (the
    first of ``eos_id`` when it is a list) forced at the last position, every one of them
    suppressed before it."""
    import torch

    ids = [eos_id] if isinstance(eos_id, int) else list(eos_id)
    end = (want - 1 == t).to(scores.device)
    scores = scores.clone()
    scores[:, ids] = torch.where(end[:, None], scores[:, ids], torch.full_like(
        scores[:, ids], -float("inf")))
    forced = torch.full_like(scores, -float("inf"))
    forced[:, ids[0]] = 0.0
    return torch.where(end[:, None], forced, scores)


def length_processor(targets, eos_id: int):
    """A transformers logits processor that ends row b at exactly ``targets[b]`` tokens: EOS
    forced at that step and suppressed before it (rows beyond the list cycle through it)."""
    import torch

    class ForceLength:
        def __init__(self):
            self.start = None

        def __call__(self, input_ids, scores):
            if self.start is None:
                self.start = input_ids.shape[1]
            t = input_ids.shape[1] - self.start           # tokens generated so far
            want = torch.tensor([targets[b % len(targets)] for b in range(scores.shape[0])])
            return _force(want, t, scores, eos_id)

    return ForceLength


def length_hook(targets_for_call, eos_id: int):
    """The same for mindrl's torch decode loop (``model.mindrl_logits_hook``): ``targets_for_call
    (rows)`` gives the lengths of one call's rows; the loop's live rows carry their ids."""
    import torch

    def per_call(rows: int):
        want_all = torch.tensor(targets_for_call(rows))

        def step(row_ids, t, scores):
            return _force(want_all[row_ids.cpu()], t, scores, eos_id)

        return step

    return per_call


def wrap_generate(model, tokens: int, mixed: bool, eos_id: int) -> None:
    """EOS suppressed to exactly ``tokens`` (``mixed`` off) or lengths from
    :func:`mixed_lengths`, on ``model.generate`` and on mindrl's decode loop alike."""
    from transformers import LogitsProcessorList

    gen = model.generate
    model.mindrl_logits_hook = length_hook(
        (lambda rows: mixed_lengths(rows, tokens)) if mixed else
        (lambda rows: [tokens + 1] * rows), eos_id)

    def generate(*args, generation_config=None, **kw):
        if not mixed:
            if generation_config is not None:
                generation_config.min_new_tokens = generation_config.max_new_tokens
            else:
                kw["min_new_tokens"] = kw.get("max_new_tokens", tokens)
            return gen(*args, generation_config=generation_config, **kw)
        ids = kw.get("input_ids", args[0] if args else None)
        proc = length_processor(mixed_lengths(ids.shape[0], tokens), eos_id)()
        lp = LogitsProcessorList(list(kw.pop("logits_processor", None) or []) + [proc])
        return gen(*args, generation_config=generation_config, logits_processor=lp, **kw)

    model.generate = generate


def make_prompts(count: int, seed: int = 0):
    """``count`` arithmetic prompts of identical token length (digits are single tokens)."""
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        rows.append({"problem": f"Compute {a} + {b}. Think, then give the answer.",
                     "answer": str(a + b)})
    return rows


# --------------------------------------------------------------------------- mindrl side
def _mindrl_worker(a) -> None:
    torch_one_thread()
    from mindrl.config.loader import load_config
    from mindrl.trainer.rl import RLTrainer

    size = SIZES[a.size]
    steps = a.warmup + a.steps
    work = Path(a.workdir)
    data = work / "prompts.jsonl"
    over = [
        f"model.path={size['model']}", "model.chat_template=none", "model.dtype=float32",
        f"data.train_file={data}", "data.shuffle=false", "data.max_val_samples=0",
        f"rollout.engine={a.engine}", f"rollout.n={size['n']}",
        f"rollout.max_new_tokens={size['tokens']}", "rollout.temperature=1.0",
        "rollout.top_p=1.0", "rollout.top_k=-1",
        f"train.steps={steps}", f"train.prompts_per_step={size['prompts']}",
        f"train.micro_batch_size={MICRO}", "train.mini_batch_size=0", "train.ppo_epochs=1",
        f"train.lr={LR}", "train.lr_schedule=constant", "train.warmup_steps=0",
        "train.weight_decay=0.0", "train.grad_clip=1.0", "train.threads=1",
        "train.recompute_old_logp=false", "algorithm.kl.coef=0.0",
        "algorithm.adv_estimator=grpo", "algorithm.loss_agg_mode=token_mean",
        f"reward.num_workers={a.reward_workers}",
        f"reward.functions=[{{name: 'trl_compare:{reward_name(a)}'}}]",
        "validation.every=0", "logging.tensorboard=false", "logging.progress_bar=false",
        "logging.plot=false", "checkpoint.save_final=false", "checkpoint.every=0",
        "checkpoint.resume=false", f"logging.output_dir={work / ('run_' + a.engine)}",
    ] + list(a.set)
    t0 = time.perf_counter()
    tr = RLTrainer(load_config(None, over))
    setup_s = time.perf_counter() - t0
    _force_length_mindrl(tr, size["tokens"], a.mixed)
    prof = Profile(a.profile)
    ends, cpu_ends, phases = [], [], []
    original = RLTrainer.run_step

    def timed_run_step(self):
        if self.step == a.warmup:
            prof.start()
        m = original(self)
        ends.append(time.perf_counter())
        cpu_ends.append(time.process_time())
        p = {k: float(v) for k, v in m.items()
             if k.startswith(("time/", "response_length/", "rollout/logprob_gap", "profile/"))}
        if "profile/overhead_fraction" not in p:
            p["time/other"] = p["time/step"] - sum(p.get(k, 0.0) for k in MINDRL_PHASES)
        phases.append(p)
        return m

    RLTrainer.run_step = timed_run_step
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        tr.fit()                              # writes metrics.jsonl with the time/* phases
    finally:
        prof.stop()
        tr.close()
    step_times = [e - s for s, e in zip([start] + ends[:-1], ends)]
    cpu_times = [e - s for s, e in zip([cpu_start] + cpu_ends[:-1], cpu_ends)]
    emit({"side": f"mindrl-{a.engine}", "size": a.size, "setup_s": setup_s,
           "step_times": step_times, "cpu_times": cpu_times, "phases": phases, "warmup": a.warmup})


def _force_length_mindrl(tr, tokens: int, mixed: bool = False) -> None:
    """Every sample exactly ``tokens`` long, EOS suppressed as in TRL's min_new_tokens (or
    the :func:`mixed_lengths`, ``--mixed``)."""
    ahead = getattr(tr, "ahead", None)
    if ahead is not None and ahead.process:     # rollout.async_ahead: the sampler's own model
        import functools

        ahead.child_setup = functools.partial(wrap_generate, tokens=tokens, mixed=mixed,
                                              eos_id=tr.tokenizer.eos_token_id)
    elif tr.cfg.rollout.engine == "native":
        wrap_generate(tr.engine.model, tokens, mixed, tr.tokenizer.eos_token_id)
    else:
        if mixed:
            raise SystemExit("--mixed: native engines only")
        engine = tr.engine
        params = engine._vllm_params

        def vllm_params(sampling, seed):
            p = params(sampling, seed)
            p.min_tokens = p.max_tokens
            return p

        engine._vllm_params = vllm_params


# --------------------------------------------------------------------------- TRL side
def _trl_worker(a) -> None:
    torch_one_thread()
    sys.path.insert(0, str(TRL_DIR))
    import datasets.arrow_dataset as _ad
    import torch
    from datasets import Dataset

    # datasets' dill-based fingerprint of an in-memory table fails on this stack ("Can't pickle
    # <class 'MonthDayNano'>"); the fingerprint only names cache files, so use a random one.
    _ad.generate_fingerprint = lambda _ds: __import__("secrets").token_hex(8)
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from mindrl.models.tiny import resolve_model_path

    size = SIZES[a.size]
    steps = a.warmup + a.steps
    B = size["prompts"] * size["n"]
    # bench/real_width.py sets these: the model's dtype (bf16 = TRL's bf16 mode with the weights
    # loaded in bf16), the device, and TRL's colocated vLLM rollouts (GPU)
    dtype, device = getattr(a, "dtype", "float32"), getattr(a, "device", "cpu")
    vllm = dict(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3,
                vllm_enable_sleep_mode=False) if getattr(a, "trl_vllm", False) else {}
    rows = [json.loads(x) for x in (Path(a.workdir) / "prompts.jsonl").read_text().splitlines()]
    ds = Dataset.from_list([{"prompt": r["problem"], "answer": r["answer"]} for r in rows])
    path = resolve_model_path(size["model"])
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    args = GRPOConfig(
        output_dir=str(Path(a.workdir) / "trl_out"), report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, use_cpu=device == "cpu", bf16=dtype == "bfloat16",
        fp16=False, seed=0,
        max_steps=steps, per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=B // MICRO, steps_per_generation=B // MICRO,
        num_generations=size["n"], max_completion_length=size["tokens"],
        temperature=1.0, top_p=1.0, top_k=0, beta=0.0, num_iterations=1, epsilon=0.2,
        loss_type="dapo", scale_rewards="group", learning_rate=LR, lr_scheduler_type="constant",
        warmup_steps=0, optim="adamw_torch", weight_decay=0.0, adam_beta1=0.9,
        adam_beta2=0.999, adam_epsilon=1e-8, max_grad_norm=1.0, gradient_checkpointing=False,
        shuffle_dataset=False, dataloader_num_workers=0, log_completions=False,
        model_init_kwargs={"dtype": getattr(torch, dtype)}, **vllm)
    t0 = time.perf_counter()
    trainer = GRPOTrainer(model=path, reward_funcs=globals()[reward_name(a)], args=args,
                          train_dataset=ds, processing_class=tok)
    wrap_generate(trainer.model, size["tokens"], a.mixed, tok.eos_token_id)
    setup_s = time.perf_counter() - t0

    # per-phase wall clock: wrappers around TRL's own methods
    acc = {}

    def timed(obj, name, key):
        fn = getattr(obj, name)

        def wrapper(*x, **k):
            t = time.perf_counter()
            try:
                return fn(*x, **k)
            finally:
                acc[key] = acc.get(key, 0.0) + time.perf_counter() - t
        setattr(obj, name, wrapper)

    timed(trainer, "_generate_single_turn", "time/rollout")
    timed(trainer, "_calculate_rewards", "time/reward")
    timed(trainer, "_generate_and_score_completions", "_gen_and_score")
    timed(trainer, "training_step", "_training_step")      # includes _prepare_inputs
    timed(trainer, "_get_per_token_logps_and_entropies", "_logp_forwards")
    prof = Profile(a.profile)
    ends, cpu_ends, phases, lengths = [], [], [], []

    class StepClock(TrainerCallback):
        def on_step_begin(self, args_, state, control, **kw):
            if state.global_step == a.warmup:
                prof.start()

        def on_optimizer_step(self, args_, state, control, **kw):
            acc["_opt_end"] = time.perf_counter()

        def on_step_end(self, args_, state, control, **kw):
            ends.append(time.perf_counter())
            cpu_ends.append(time.process_time())
            p = {k: v for k, v in acc.items() if not k.startswith("_")}
            p["time/score_other"] = acc.get("_gen_and_score", 0) - p.get("time/rollout", 0) \
                - p.get("time/reward", 0)
            p["time/update_fwd_bwd"] = acc.get("_training_step", 0) - acc.get("_gen_and_score", 0)
            phases.append(p)
            acc.clear()

        def on_log(self, args_, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                lengths.append(logs["completions/mean_length"])

    trainer.add_callback(StepClock())
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        trainer.train()
    finally:
        prof.stop()
    step_times = [e - s for s, e in zip([start] + ends[:-1], ends)]
    for p, s, ln in zip(phases, step_times, lengths + [None] * len(phases)):
        p["time/step"] = s
        p["time/optimizer_and_rest"] = s - sum(p.get(k, 0.0) for k in TRL_PHASES[:-1])
        if ln is not None:
            p["response_length/mean"] = ln
    cpu_times = [e - s for s, e in zip([cpu_start] + cpu_ends[:-1], cpu_ends)]
    emit({"side": "trl", "size": a.size, "setup_s": setup_s, "step_times": step_times,
           "cpu_times": cpu_times,
           "phases": phases, "warmup": a.warmup,
           "versions": {"trl": __import__("trl").__version__, "torch": torch.__version__,
                        "transformers": __import__("transformers").__version__}})


# --------------------------------------------------------------------------- driver
def trl_available() -> bool:
    if not (TRL_DIR / "trl").is_dir():
        return False
    code = f"import sys; sys.path.insert(0, {str(TRL_DIR)!r}); import trl, datasets, accelerate"
    probe = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                           text=True)
    return probe.returncode == 0


def reward_name(a) -> str:
    return "slow_bench_reward" if a.reward_ms > 0 else "bench_reward"


def run_side(side: str, engine: str, size: str, workdir: Path, a, sets=()) -> dict:
    # a variant may set its own reward cost: "bench.reward_ms=50"
    ms = [float(x.split("=", 1)[1]) for x in sets if x.startswith("bench.reward_ms=")]
    sets = [x for x in sets if not x.startswith("bench.reward_ms=")]
    if ms:
        a = argparse.Namespace(**dict(vars(a), reward_ms=ms[-1]))
    cmd = [sys.executable, __file__, "--worker", side, "--engine", engine, "--size", size,
           "--workdir", str(workdir), "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--reward-ms", str(a.reward_ms), "--reward-workers", str(a.reward_workers)]
    cmd += ["--mixed"] if a.mixed else []
    cmd += [x for kv in sets for x in ("--set", kv)]
    if a.profile:
        cmd += ["--profile", str(Path(a.profile).resolve() / f"{side}-{engine}-{size}.prof")]
    env = dict(QUIET_ONE_THREAD_ENV, MINDRL_BENCH_REWARD_MS=str(a.reward_ms))
    res = run_worker(cmd, what=f"{side} ({engine}, {size})", cwd=workdir, timeout=a.timeout,
                     env=env, repo=REPO)
    res.update(engine=engine)
    return res


def fmt_phases(phases: dict, side: str) -> str:
    order = TRL_PHASES if side == "trl" else MINDRL_PHASES + ("time/other",)
    if side != "trl" and "profile/overhead_fraction" in phases:       # logging.profile=true
        from mindrl.trainer.profile import PHASES

        order = PHASES
        return ", ".join(f"{k.split('/', 1)[1]} {phases[k]:.3f}" for k in order
                         if k in phases) + \
            f"; overhead {100 * phases['profile/overhead_fraction']:.1f}%"
    return ", ".join(f"{k.split('/', 1)[1]} {phases[k]:.3f}" for k in order if k in phases)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--steps", type=int, default=5, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up steps, not counted")
    ap.add_argument("--repeats", type=int, default=1,
                    help="run each side this many times, interleaved; steps are pooled")
    ap.add_argument("--no-vllm", action="store_true", help="skip mindrl + vLLM (small size)")
    ap.add_argument("--no-trl", action="store_true", help="mindrl only")
    ap.add_argument("--profile", default="", help="directory for cProfile dumps of each side")
    ap.add_argument("--json", default="", help="also write all results to this JSON file")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--mixed", action="store_true",
                    help="long-tailed response lengths (the same on both sides) instead of "
                         "every response at max_new_tokens")
    ap.add_argument("--reward-ms", type=float, default=0.0,
                    help="the reward sleeps this many ms per item (both sides)")
    ap.add_argument("--reward-workers", type=int, default=0, help="mindrl reward.num_workers")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a mindrl config override for every mindrl run (repeatable)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:K=V[,K=V]",
                    help="an extra mindrl run with these overrides, e.g. "
                         "'packed:train.padding_free=true' (repeatable; interleaved); "
                         "bench.reward_ms=50 gives that run its own reward cost")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    ap.add_argument("--engine", default="native", help=argparse.SUPPRESS)
    ap.add_argument("--size", default="tiny", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker == "mindrl":
        _mindrl_worker(a)
        return 0
    if a.worker == "trl":
        _trl_worker(a)
        return 0

    if not a.no_trl and not trl_available():
        print(TRL_MISSING, file=sys.stderr)
        return 2
    sizes = [s.strip() for s in a.sizes.split(",") if s.strip()]
    results = []
    with tempfile.TemporaryDirectory(prefix="mindrl_trl_bench_") as tmp:
        for size in sizes:
            cfg = SIZES[size]
            work = Path(tmp) / size
            work.mkdir()
            rows = make_prompts(cfg["prompts"] * (a.warmup + a.steps + 2))
            (work / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            plan = [("mindrl", "native", "", [])] + \
                ([] if a.no_trl else [("trl", "native", "", [])])
            if size == "small" and not a.no_vllm:
                plan.append(("mindrl", "vllm", "", []))
            for v in a.variant:
                name, _, sets = v.partition(":")
                plan.append(("mindrl", "native", name, [x for x in sets.split(",") if x]))
            for rep in range(a.repeats):       # interleaved, so load drift hits both sides
                for side, engine, name, sets in plan:
                    print(f"[bench] {size} #{rep + 1}: {side} ({name or engine}) ... load "
                          f"{loadavg():.2f}", file=sys.stderr, flush=True)
                    r = run_side(side, engine, size, work, a, list(a.set) + sets)
                    if name:
                        r["side"] = f"mindrl-{name}"
                    results.append(r)
                    s = summarize([r])
                    print(f"[bench]   median {s['median']:.3f} s/step (min {s['min']:.3f}, max "
                          f"{s['max']:.3f}, n={s['n']}); load {r['load_before']:.2f} -> "
                          f"{r['load_after']:.2f}", file=sys.stderr, flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    print(render(results, a))
    return 0


def render(results, a) -> str:
    groups = {}
    for r in results:
        groups.setdefault((r["size"], r["side"]), []).append(r)
    summ = {k: summarize(v) for k, v in groups.items()}
    head = (f"Median wall s/step (min-max) over {a.repeats} x {a.steps} measured steps after "
            f"{a.warmup} warm-up steps per run, 1 thread, float32 CPU; CPU = median process CPU "
            "s/step (less sensitive to other load); load = 1-min loadavg during the runs.")
    cols = ("| size | prompts x n x tokens | mindrl native | TRL GRPOTrainer | ratio mindrl/TRL "
            "| mindrl + vLLM | CPU s/step mindrl / TRL / vLLM (ratio) | load |")
    lines = [head, "", cols, "|---|---|---|---|---|---|---|---|"]
    for size in dict.fromkeys(r["size"] for r in results):
        c = SIZES[size]
        m, t, v = (summ.get((size, k)) for k in ("mindrl-native", "trl", "mindrl-vllm"))
        cell = lambda s: f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f})" if s else "-"
        ratio = f"**{m['median'] / t['median']:.2f}**" if m and t else "-"
        loads = [x for s in (m, t, v) if s for x in s["loads"]]
        load = f"{min(min(x) for x in loads):.1f}-{max(max(x) for x in loads):.1f}"
        cpu = " / ".join(f"{s['cpu_median']:.3f}" if s else "-" for s in (m, t, v))
        if m and t:
            cpu += f" ({m['cpu_median'] / t['cpu_median']:.2f})"
        lines.append(f"| {size} | {c['prompts']} x {c['n']} x {c['tokens']} | {cell(m)} | "
                     f"{cell(t)} | {ratio} | {cell(v)} | {cpu} | {load} |")
    variants = [k for k in summ if k[1].startswith("mindrl-") and
                k[1] not in ("mindrl-native", "mindrl-vllm")]
    if variants:
        lines += ["", "| size | mindrl variant | s/step | ratio to TRL | ratio to mindrl native "
                  "|", "|---|---|---|---|---|"]
        for size, side in variants:
            v, t, m = summ[(size, side)], summ.get((size, "trl")), summ.get((size, "mindrl-native"))
            lines.append(f"| {size} | {side[7:]} | {v['median']:.3f} ({v['min']:.3f}-"
                         f"{v['max']:.3f}) | "
                         + (f"**{v['median'] / t['median']:.2f}**" if t else "-") + " | "
                         + (f"{v['median'] / m['median']:.2f}" if m else "-") + " |")
    lines += ["", "Peak RSS per side (MB; the worker process, and its largest child process such "
              "as a sampler, in parentheses):", ""]
    for (size, side), s in summ.items():
        lines.append(f"- {size} / {side}: {s['peak_rss_mb']:.0f}"
                     + (f" ({s['peak_rss_children_mb']:.0f})" if s["peak_rss_children_mb"] >= 1
                        else ""))
    lines += ["", "Where the time goes (median seconds per phase over the measured steps):", ""]
    for (size, side), s in summ.items():
        ln = s["phases"].get("response_length/mean")
        lines.append(f"- {size} / {side}: " + fmt_phases(s["phases"], side)
                     + (f" (mean response {ln:.0f} tokens)" if ln is not None else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
