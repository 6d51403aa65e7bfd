"""Performance at real model width: mindrl vs TRL, and against what the machine can compute.

The model is a randomly initialised Qwen2-architecture model built locally from Qwen2.5-0.5B's
config (hidden 896, 14 / 2 heads, intermediate 4,864, vocabulary 151,936, tied embeddings) with
``--layers`` decoder layers (default 2: the vocabulary-sized head then holds 82% of the
parameters, as in a deeper model's rollout/update, only fewer layers; the body's share of a real
24-layer model's FLOPs is larger). The built-in tiny tokenizer encodes the prompts (its ids are a
subset of the vocabulary); sampled ids above it decode to nothing, on both sides alike.

    python bench/real_width.py                       # the full run (~10 min on 1 core a side)
    python bench/real_width.py --quick               # a smoke run of every part (~2 min)
    python bench/real_width.py --parts grpo --dtypes bfloat16 --repeats 3
    python bench/real_width.py --parts decode        # decode against the bandwidth bound
    python bench/real_width.py --device cuda         # the GPU variant (see below)

Parts (``--parts``, comma-separated):

* ``grpo``: one GRPO step (rollout, scoring, log-probs, update) through mindrl's torch backend
  (native engine, defaults plus ``train.recompute_old_logp=false``) and TRL's ``GRPOTrainer``
  (``use_vllm=False``), each side in its own one-thread process, runs interleaved (A B A B);
  the workers are bench/trl_compare.py's, so everything that file holds equal is equal here
  (prompts, group size, long-tailed response lengths forced identically on both sides, reward,
  AdamW, clip, micro-batches of 8). bf16: mindrl ``model.dtype=bfloat16`` (float32 masters);
  TRL ``bf16=True`` with the weights loaded in bf16 (its documented bf16 mode, no masters).
  Reported: median s/step, response tokens/s, peak RSS per side, ratio (target <= 0.7x).
* ``machine``: in one process per dtype, (a) dense GEMM FLOP/s of ``torch.matmul`` at the
  update's own shapes (each linear layer's forward, input-gradient and weight-gradient matmul
  at the micro-batch's token count; the head at its response-token count), (b) read bandwidth
  (``sum`` of a 1 GiB tensor), (c) mindrl's ``train_step`` on a fixed batch: achieved FLOP/s =
  (6 x body parameters x tokens + 6 x head parameters x response tokens + 12 x layers x hidden
  x mean context x tokens) / time, over (a) (target >= 60%), (d) mindrl's decode loop at batch 1:
  tokens/s over the memory-bandwidth bound (bandwidth / weight bytes read per decode step,
  target >= 50%), and at the rollout's batch for reference; steady state (a call less a
  2-token call: prefill, first token and the packing of the weights left out, the packing
  timed apart), each on packed weights (the engine's default on CPU,
  ``rollout.native_packed_weights``) and, in the same process interleaved, on the plain ones
  ("unpacked").
* ``decode``: (b) and (d) of ``machine`` alone.
* ``mindspore``: MindSpore vs torch at this width, float32 (MindSpore has no bf16 MatMul on
  CPU): compiled train step vs torch eager step, and the native MindSpore sampler vs mindrl's
  torch decode loop (targets <= 1.0x). ``--ms-rows sampler`` (or ``train``) runs one of the
  two rows alone.

``--device cuda`` (written against the documented APIs; needs a GPU with vLLM installed):
Qwen2.5-1.5B's shape (hidden 1536, 12 / 2 heads, intermediate 8,960, 28 layers unless
``--layers``), bf16, rollouts on vLLM on both sides (mindrl ``rollout.engine=vllm``; TRL
``use_vllm=True, vllm_mode="colocate"``), response lengths left to the model (a random model
over 151,936 ids almost never samples EOS, so nearly every response runs to the limit on both
sides); tokens/s and MFU of the update against the measured bf16 GEMM rate.

Each table row states its figure, the ratio and "target met" / "target missed".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# bench/ holds a rewards.py that would shadow the `rewards` package: the repository first,
# bench/ last (trl_compare's reward is imported as 'trl_compare:bench_reward').
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

from bench.harness import (QUIET_ONE_THREAD_ENV, emit, loadavg,  # noqa: E402
                           pool_runs, run_worker, torch_one_thread)

SHAPES = {"cpu": "Qwen2.5-0.5B", "cuda": "Qwen2.5-1.5B"}
# one GRPO step: prompts x samples, response tokens at most (long-tailed lengths on CPU)
GRPO = {"cpu": dict(prompts=4, n=4, tokens=64), "cuda": dict(prompts=16, n=8, tokens=512)}
QUICK_GRPO = dict(prompts=2, n=4, tokens=16)
# the update of the machine part: rows, micro-batch rows, prompt and response tokens
UPDATE = {"cpu": dict(rows=8, micro=4, prompt=16, response=48),
          "cuda": dict(rows=64, micro=16, prompt=128, response=512)}
QUICK_UPDATE = dict(rows=4, micro=2, prompt=8, response=16)
MS_GUARD_MB = float(os.environ.get("MINDRL_BENCH_MS_GUARD_MB", "8000"))
TARGETS = {"grpo": 0.7, "mfu": 0.6, "decode": 0.5, "mindspore": 1.0}


def trl_dir() -> Path:
    """Where TRL is installed for the benches (outside the project venv)."""
    env = os.environ.get("MINDRL_BENCH_TRL_DIR")
    if env:
        return Path(env)
    for d in (HERE / ".trl_pkgs", REPO / "tests" / ".peers" / "trl"):
        if (d / "trl").is_dir():
            return d
    return HERE / ".trl_pkgs"


def verdict(value: float, target: float, higher_is_better: bool) -> str:
    ok = value >= target if higher_is_better else value <= target
    return "target met" if ok else "target missed"


# --------------------------------------------------------------------------- the model
def build_model(directory: Path, shape: str, layers: int) -> dict:
    """A random-init Qwen2 model of ``shape``'s width with ``layers`` layers, float32 on disk,
    and the built-in tiny tokenizer; returns its config fields."""
    import shutil

    import torch
    import transformers

    from mindrl.memory.shapes import KNOWN_MODELS
    from mindrl.models.tiny import TOKENIZER_FILES, resolve_model_path

    tiny = Path(resolve_model_path("builtin:tiny"))
    directory.mkdir(parents=True, exist_ok=True)
    for name in list(TOKENIZER_FILES) + ["generation_config.json"]:
        if (tiny / name).is_file():
            shutil.copy(tiny / name, directory / name)
    fields = {k: v for k, v in KNOWN_MODELS[shape].items() if k != "model_type"}
    fields.update(num_hidden_layers=layers, use_sliding_window=False, torch_dtype="float32")
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**fields)).save_pretrained(
        directory, safe_serialization=True)
    return fields


def linear_shapes(c: dict):
    """(in, out) of every linear layer of one decoder layer (Qwen2)."""
    h, kv = c["hidden_size"], c["num_key_value_heads"] * (c["hidden_size"]
                                                          // c["num_attention_heads"])
    i = c["intermediate_size"]
    return [(h, h), (h, kv), (h, kv), (h, h), (h, i), (h, i), (i, h)]


def param_counts(c: dict) -> dict:
    """Parameters of the body's linear layers and of the (tied) head, and bytes read per decode
    step per element size (every linear weight once, the head's full matrix, norms ignored)."""
    body = c["num_hidden_layers"] * sum(a * b for a, b in linear_shapes(c))
    head = c["vocab_size"] * c["hidden_size"]
    return {"body": body, "head": head}


def update_flops(c: dict, tokens: int, response_tokens: int, mean_ctx: float) -> float:
    """Training FLOPs of one pass over ``tokens`` (forward + backward = 3 x forward): 6 per
    body parameter per token, 6 per head parameter per response token (the head is computed
    only where a log-prob is needed, on both sides), attention 12 x layers x hidden x context
    per token (QK^T and AV, forward and backward, causal mask not discounted)."""
    p = param_counts(c)
    return (6 * p["body"] * tokens + 6 * p["head"] * response_tokens
            + 12 * c["num_hidden_layers"] * c["hidden_size"] * mean_ctx * tokens)


# --------------------------------------------------------------------------- grpo (TRL) part
BASE = "mindrl_base"       # --update-baseline: mindrl with the update's fused paths switched off


def update_baseline() -> None:
    """Switch off the torch update's fused paths in this worker: autograd log_softmax + gather
    per head chunk, the tied embedding's dense gradient, torch's default (unfused) AdamW."""
    from mindrl.backends.torch import chunked_head, optim

    chunked_head.FUSED_TARGET_LOGP = chunked_head.SPARSE_TIED_EMBEDDING = False
    optim.FUSED_ADAMW = False


def sides(a) -> tuple:
    return ("mindrl", "trl") + ((BASE,) if a.update_baseline else ())


def _grpo_worker(a) -> None:
    import trl_compare

    cfg = QUICK_GRPO if a.quick else GRPO[a.device]
    trl_compare.SIZES["real"] = dict(model=a.model, **cfg)
    ns = argparse.Namespace(size="real", workdir=a.workdir, warmup=a.warmup, steps=a.steps,
                            engine="vllm" if a.device == "cuda" else "native",
                            mixed=a.device == "cpu", reward_ms=0.0, reward_workers=0,
                            profile=a.profile, dtype=a.dtype, device=a.device,
                            trl_vllm=a.device == "cuda",
                            set=[f"model.dtype={a.dtype}", f"device={a.device}"]
                            + (["rollout.gpu_memory_utilization=0.3"] if a.device == "cuda"
                               else []))
    if a.side == BASE:
        update_baseline()
    if a.side == "trl":
        sys.path.insert(0, str(trl_dir()))
        trl_compare.TRL_DIR = trl_dir()
        trl_compare._trl_worker(ns)
    else:
        trl_compare._mindrl_worker(ns)


def run_grpo(a, model_dir: Path, work: Path) -> list:
    import trl_compare

    cfg = QUICK_GRPO if a.quick else GRPO[a.device]
    rows = trl_compare.make_prompts(cfg["prompts"] * (a.warmup + a.steps + 2))
    (work / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = dict(QUIET_ONE_THREAD_ENV, MINDRL_BENCH_TRL_DIR=str(trl_dir()))
    if a.device == "cuda":
        env = {k: v for k, v in env.items() if not k.endswith("_NUM_THREADS")}
    results = []
    for dtype in a.dtypes:
        for rep in range(a.repeats):
            for side in sides(a):
                print(f"[bench] grpo {dtype} #{rep + 1}: {side} ... load {loadavg():.2f}",
                      file=sys.stderr, flush=True)
                cmd = [sys.executable, __file__, "--worker", "grpo", "--side", side,
                       "--model", str(model_dir), "--workdir", str(work), "--dtype", dtype,
                       "--device", a.device, "--steps", str(a.steps), "--warmup", str(a.warmup)]
                cmd += ["--quick"] if a.quick else []
                cmd += ["--profile", str(Path(a.profile).resolve() / f"{side}-{dtype}.prof")] \
                    if a.profile else []
                r = run_worker(cmd, what=f"grpo {side} {dtype}", cwd=work, timeout=a.timeout,
                               env=env, repo=REPO)
                r.update(dtype=dtype, side=side)
                s = pool_runs([r])
                print(f"[bench]   median {s['median']:.3f} s/step; load {r['load_before']:.2f}"
                      f" -> {r['load_after']:.2f}", file=sys.stderr, flush=True)
                results.append(r)
    return results


def grpo_rows(results: list, a) -> list:
    import trl_compare

    cfg = QUICK_GRPO if a.quick else GRPO[a.device]
    B = cfg["prompts"] * cfg["n"]
    forced = sum(trl_compare.mixed_lengths(B, cfg["tokens"])) if a.device == "cpu" else None
    out = []
    for dtype in a.dtypes:
        s = {side: pool_runs([r for r in results if r["dtype"] == dtype and r["side"] == side])
             for side in sides(a)}

        def toks(side):
            ln = s[side]["phases"].get("response_length/mean")
            return forced if forced is not None else B * (ln or cfg["tokens"])

        ratio = s["mindrl"]["median"] / s["trl"]["median"]
        base = s[BASE]["median"] / s["trl"]["median"] if BASE in s else None
        loads = [x for v in s.values() for pair in v["loads"] for x in pair]
        out.append(dict(
            dtype=dtype, ratio=ratio, verdict=verdict(ratio, TARGETS["grpo"], False),
            base_ratio=base,
            load=f"{min(loads):.1f}-{max(loads):.1f}",
            **{f"{k}_{side}": v for side in s for k, v in (
                ("s", s[side]["median"]), ("min", s[side]["min"]), ("max", s[side]["max"]),
                ("cpu", s[side]["cpu_median"]), ("tps", toks(side) / s[side]["median"]),
                ("rss", s[side]["peak_rss_mb"]), ("phases", s[side]["phases"]))}))
    return out


# --------------------------------------------------------------------------- machine part
def _median_time(fn, reps: int) -> float:
    fn()                                                   # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def gemm_rate(c: dict, tokens: int, response_tokens: int, dtype, device, reps: int) -> dict:
    """FLOP/s of ``torch.matmul`` over the update's matmuls at the model's shapes: per linear
    layer (in, out) at ``tokens`` rows its forward [T, in] x [in, out], input gradient
    [T, out] x [out, in] and weight gradient [in, T] x [T, out]; the head at
    ``response_tokens`` rows. Total FLOPs over total time (each shape timed once per layer)."""
    import torch

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    flops = secs = 0.0
    shapes = [(tokens, i, o, c["num_hidden_layers"]) for i, o in linear_shapes(c)]
    shapes.append((response_tokens, c["hidden_size"], c["vocab_size"], 1))
    by_shape = {}
    for T, i, o, count in shapes:
        x = torch.randn(T, i, dtype=dtype, device=device)
        w = torch.randn(i, o, dtype=dtype, device=device)
        g = torch.randn(T, o, dtype=dtype, device=device)
        xt = x.t().contiguous()
        wt = w.t().contiguous()

        def three():
            torch.matmul(x, w)
            torch.matmul(g, wt)
            torch.matmul(xt, g)
            sync()

        t = _median_time(three, reps)
        f = 3 * 2.0 * T * i * o
        by_shape[f"{T}x{i}x{o}"] = f / t
        flops += f * count
        secs += t * count
    return {"flops_per_s": flops / secs, "by_shape": by_shape}


def read_bandwidth(device, reps: int, gib: float = 1.0) -> float:
    """Bytes/s of ``x.sum()`` over a ``gib`` GiB float32 tensor (a read of every byte)."""
    import torch

    x = torch.ones(int(gib * 2 ** 30 / 4), dtype=torch.float32, device=device)

    def once():
        x.sum()
        if device.type == "cuda":
            torch.cuda.synchronize()

    return x.numel() * 4 / _median_time(once, reps)


def _machine_worker(a) -> None:
    torch_one_thread()
    if a.side == BASE:
        update_baseline()
    import numpy as np
    import torch

    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.rollout.native_torch import NativeTorchEngine
    from mindrl.torch_device import DTYPES
    from mindrl.types import LossNormalizers, SamplingParams, TokenBatch, TrainBatch

    c = json.loads((Path(a.model) / "config.json").read_text())
    u = QUICK_UPDATE if a.quick else UPDATE[a.device]
    reps = 1 if a.quick else 3
    device = torch.device(a.device)
    dt = DTYPES[a.dtype]
    R, P, T, M = u["rows"], u["prompt"], u["response"], u["micro"]
    micro_tokens, micro_resp = M * (P + T), M * T
    out = {"dtype": a.dtype, "config": c}
    decode_only = a.worker == "decode"                     # (b) and (d) only
    if not decode_only:
        out["gemm"] = gemm_rate(c, micro_tokens, micro_resp, dt, device, reps)
    out["bandwidth"] = read_bandwidth(device, reps, 0.25 if a.quick else 1.0)

    # (c) the update: mindrl's train_step on R rows of P + T tokens in micro-batches of M
    over = [f"model.path={a.model}", f"model.dtype={a.dtype}", f"device={a.device}",
            "train.threads=1", f"train.micro_batch_size={M}", f"data.max_prompt_len={P}",
            f"rollout.max_new_tokens={T}", "algorithm.kl.coef=0", "train.lr=1e-6"]
    cfg = load_config(None, over)
    backend = build_backend("torch", cfg)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(R, P + T)).astype(np.int64)
    tokens = TokenBatch(ids, np.ones_like(ids), np.ones((R, T), np.float32), P)
    norm = LossNormalizers(global_tokens=float(R * T), global_seqs=float(R), max_len=T)
    batch = TrainBatch(tokens, rng.standard_normal((R, T)).astype(np.float32),
                       np.zeros((R, T), np.float32))
    micro = [batch.rows(np.arange(i, i + M)) for i in range(0, R, M)]

    def step():
        backend.train_step(micro, norm)
        if device.type == "cuda":
            torch.cuda.synchronize()

    if not decode_only:
        out["update_s"] = _median_time(step, reps)
        out["update_flops"] = update_flops(c, R * (P + T), R * T, (P + T) / 2)
        out["update_tokens"] = R * (P + T)

    # (d) decode: the torch native engine on the backend's own model, every row exactly
    # ``new`` tokens (EOS suppressed), batch 1 and the rollout's batch
    import trl_compare

    from mindrl.rollout.native_torch import stop_ids

    engine = NativeTorchEngine(backend.model, backend.tokenizer, device=device)
    new = 16 if a.quick else 64
    backend.model.mindrl_logits_hook = trl_compare.length_hook(
        lambda rows: [new + 1] * rows, stop_ids(backend.tokenizer,
                                                backend.model.generation_config))
    g = QUICK_GRPO if a.quick else GRPO[a.device]
    decode = {}
    for rows in (1, g["prompts"] * g["n"]):
        n = 1 if rows == 1 else g["n"]
        prompts = [list(rng.integers(10, 1000, P)) for _ in range(rows // n)]

        def gen(max_new, packed):
            engine.packed_weights = packed
            sp = SamplingParams(n=n, temperature=1.0, max_new_tokens=max_new, seed=0)
            r = engine.generate(prompts, sp)
            assert all(len(x) == max_new for x in r.response_ids), r.response_ids

        # steady-state decode: a call of ``new`` tokens less a 2-token call, which holds the
        # prefill, the first token and the first decode step (where the engine packs its
        # weights: the cost per call is reported apart, "packing"); on packed weights (the
        # engine's default on CPU) and, interleaved in the same process, on the plain ones
        t = {}
        gen(new, True), gen(new, False), gen(2, True)                   # warm-up
        for _ in range(reps):
            for packed in (True, False):
                for m in (new, 2):
                    t0 = time.perf_counter()
                    gen(m, packed)
                    t.setdefault((m, packed), []).append(time.perf_counter() - t0)
        for packed in (True, False):
            full, two = (statistics.median(t[m, packed]) for m in (new, 2))
            decode[str(rows) + ("" if packed else " unpacked")] = {
                "tokens_per_s": rows * (new - 2) / max(full - two, 1e-9),
                "prefill_s": two, "call_s": full}
    out["decode"] = decode
    from mindrl.backends.torch.decode_linear import pack_weight, packing_supported

    if packing_supported(dt):                     # what packing costs a call (included above)
        linears = [m.weight for m in backend.model.modules() if type(m) is torch.nn.Linear]
        out["pack_s"] = _median_time(lambda: [pack_weight(w) for w in linears], reps)
    out["elt"] = torch.tensor([], dtype=dt).element_size()
    emit(out)


def machine_rows(res: list, a) -> list:
    rows = []
    for r in res:
        c = r["config"]
        p = param_counts(c)
        upd = "update_s" in r                                     # not in --parts decode
        achieved = r["update_flops"] / r["update_s"] if upd else None
        mfu = achieved / r["gemm"]["flops_per_s"] if upd else None
        weight_bytes = (p["body"] + p["head"]) * r["elt"]
        bound1 = r["bandwidth"] / weight_bytes                     # tokens/s at batch 1
        d1 = r["decode"]["1"]["tokens_per_s"]
        rows.append(dict(dtype=r["dtype"], achieved=achieved,
                         label=", update's fused paths off" if r.get("side") == BASE else "",
                         gemm=r["gemm"]["flops_per_s"] if upd else None, mfu=mfu,
                         mfu_verdict=verdict(mfu, TARGETS["mfu"], True) if upd else None,
                         update_s=r.get("update_s"), tokens=r.get("update_tokens"),
                         bandwidth=r["bandwidth"], weight_bytes=weight_bytes, bound1=bound1,
                         decode1=d1, decode_frac=d1 / bound1,
                         decode_verdict=verdict(d1 / bound1, TARGETS["decode"], True),
                         decode_batch={k: v for k, v in r["decode"].items() if k != "1"},
                         by_shape=r["gemm"]["by_shape"] if upd else {}, pack_s=r.get("pack_s"),
                         load=r.get("load", "")))
    return rows


# --------------------------------------------------------------------------- mindspore part
def _mindspore_worker(a) -> None:
    """Samplers first, then the train steps; the MindSpore train step under an RSS guard: past
    ``MS_GUARD_MB`` the worker reports how far it got and exits (the host is shared)."""
    torch_one_thread()
    import numpy as np
    import torch

    from mindrl.backends.base import build_backend
    from mindrl.config.loader import load_config
    from mindrl.rollout.native_torch import NativeTorchEngine
    from mindrl.types import LossNormalizers, SamplingParams, TokenBatch, TrainBatch

    out = {"ms_step_s": None, "guard_mb": MS_GUARD_MB}
    progress = Path(tempfile.gettempdir()) / f"mindrl_real_width_ms_{os.getpid()}.json"

    def stage(name):
        out["stage"] = name
        progress.write_text(json.dumps(out))

    stage("start")
    child = os.fork()
    if child:       # the guard: polls the worker's RSS, stops it past MS_GUARD_MB
        peak = 0.0
        while True:
            done, _ = os.waitpid(child, os.WNOHANG)
            if done:
                os._exit(0)
            try:
                status = Path(f"/proc/{child}/status").read_text()
                peak = max(peak, int(status.split("VmRSS:")[1].split()[0]) / 1024)
            except (OSError, IndexError, ValueError):
                pass
            if peak > MS_GUARD_MB:
                os.kill(child, 9)
                os.waitpid(child, 0)
                res = json.loads(progress.read_text())
                res.update(guard_tripped=res.get("stage", "?"), peak_mb=peak)
                progress.unlink()
                emit(res)
                os._exit(0)
            time.sleep(0.01)
    u = QUICK_UPDATE if a.quick else UPDATE["cpu"]
    M, P, T = u["micro"], u["prompt"], u["response"]
    over = [f"model.path={a.model}", "model.dtype=float32", "train.threads=1",
            f"train.micro_batch_size={M}", f"data.max_prompt_len={P}",
            f"rollout.max_new_tokens={T}", "algorithm.kl.coef=0", "train.lr=1e-6"]
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(M, P + T)).astype(np.int64)
    batch = TrainBatch(TokenBatch(ids, np.ones_like(ids), np.ones((M, T), np.float32), P),
                       rng.standard_normal((M, T)).astype(np.float32),
                       np.zeros((M, T), np.float32))
    norm = LossNormalizers(float(M * T), float(M), float(T))
    out.update(batch=f"{M} x ({P}+{T})")
    tb = build_backend("torch", load_config(None, over + ["backend=torch"]))
    stage("MindSpore backend build")
    mb = build_backend("mindspore", load_config(None, over + ["backend=mindspore"]),
                       prompt_buckets=[P], response_buckets=[T])

    # samplers: the same prompts, n samples each, up to ``new`` tokens; tokens counted per side
    g = QUICK_GRPO if a.quick else GRPO["cpu"]
    new = T                                        # the MindSpore sampler's response bucket
    prompts = [list(rng.integers(10, 1000, P)) for _ in range(g["prompts"])]
    sp = SamplingParams(n=g["n"], temperature=1.0, max_new_tokens=new, seed=0)
    te = NativeTorchEngine(tb.model, tb.tokenizer, device=torch.device("cpu"))
    rows = a.ms_rows.split(",")
    if "sampler" in rows:
        stage("MindSpore sampler")
        me = mb.native_engine()
        me.generate(prompts, sp)                                   # compiles
        te.generate(prompts, sp)
        tt, mt = [], []
        for rep in range(2 if a.quick else 3):                     # interleaved
            sp = SamplingParams(n=g["n"], temperature=1.0, max_new_tokens=new, seed=rep)
            t0 = time.perf_counter()
            r = te.generate(prompts, sp)
            tt.append(sum(map(len, r.response_ids)) / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            r = me.generate(prompts, sp)
            mt.append(sum(map(len, r.response_ids)) / (time.perf_counter() - t0))
        out.update(torch_tps=statistics.median(tt), ms_tps=statistics.median(mt),
                   sampler=f"{g['prompts']} x {g['n']} x {new}")
    if "train" not in rows:
        out["train_skipped"] = True
        progress.unlink()
        emit(out)
        return
    stage("the torch train step")
    warm, steps = (1, 1) if a.quick else (2, 3)
    ts = []
    for i in range(warm + steps):
        t0 = time.perf_counter()
        tb.train_step([batch], norm)
        ts.append(time.perf_counter() - t0)
    out["torch_step_s"] = statistics.median(ts[warm:])
    del tb, te                                     # the MindSpore step alone in memory
    import gc

    gc.collect()
    stage("the MindSpore train step's compile and first run")
    t0 = time.perf_counter()
    mb.train_step([batch], norm)                                   # compiles
    out["compile_s"], out["ms_mode"] = time.perf_counter() - t0, mb.train_mode
    stage("the MindSpore train step")
    ms = []
    for i in range(warm + steps):
        t0 = time.perf_counter()
        mb.train_step([batch], norm)
        ms.append(time.perf_counter() - t0)
    out["ms_step_s"] = statistics.median(ms[warm:])
    progress.unlink()
    emit(out)


# --------------------------------------------------------------------------- driver
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="grpo,machine,mindspore")
    ap.add_argument("--layers", type=int, default=0, help="decoder layers (0: 2 on cpu, 28 "
                    "on cuda)")
    ap.add_argument("--dtypes", default="", help="default float32,bfloat16 (cpu), bfloat16 "
                    "(cuda)")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved runs per side")
    ap.add_argument("--steps", type=int, default=2, help="measured GRPO steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="GRPO warm-up steps per run")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--quick", action="store_true", help="a smoke run of every part: small "
                    "batches, one layer, one repeat")
    ap.add_argument("--profile", default="", help="directory for cProfile dumps (grpo part)")
    ap.add_argument("--json", default="", help="also write the raw results here")
    ap.add_argument("--timeout", type=int, default=1200)
    ap.add_argument("--update-baseline", action="store_true", help="also run mindrl with the "
                    "update's fused paths off (grpo and machine parts), interleaved")
    ap.add_argument("--ms-rows", default="sampler,train", help="the mindspore part's rows: "
                    "sampler, train or both (comma-separated)")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    ap.add_argument("--side", default="", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", default="", help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        {"grpo": _grpo_worker, "machine": _machine_worker, "decode": _machine_worker,
         "mindspore": _mindspore_worker}[a.worker](a)
        return 0

    a.dtypes = [d for d in (a.dtypes or ("bfloat16" if a.device == "cuda" else
                                         "float32,bfloat16")).split(",") if d]
    layers = a.layers or (1 if a.quick else 2 if a.device == "cpu" else 28)
    if a.quick:
        a.repeats, a.steps, a.warmup = 1, 1, 1
    parts = [p for p in a.parts.split(",") if p]
    bad_rows = set(a.ms_rows.split(",")) - {"sampler", "train"}
    if bad_rows or not a.ms_rows:
        ap.error(f"--ms-rows: unknown {sorted(bad_rows)}; known: sampler, train")
    unknown = set(parts) - {"grpo", "machine", "decode", "mindspore"}
    if unknown:
        ap.error(f"--parts: unknown {sorted(unknown)}; known: grpo, machine, decode, mindspore")
    if "machine" in parts and "decode" in parts:
        parts.remove("decode")                    # the machine part holds the decode figures
    if a.device == "cuda" and "mindspore" in parts:
        parts.remove("mindspore")                 # the MindSpore comparison is the CPU one
    if "grpo" in parts and not (trl_dir() / "trl").is_dir():
        print(f"TRL not found in {trl_dir()} (set MINDRL_BENCH_TRL_DIR; see "
              "bench/trl_compare.py for the install line)", file=sys.stderr)
        return 2
    load0, t_start = loadavg(), time.perf_counter()
    raw = {"load_start": load0}
    with tempfile.TemporaryDirectory(prefix="mindrl_real_width_") as tmp:
        model_dir = Path(tmp) / "model"
        fields = build_model(model_dir, SHAPES[a.device], layers)
        p = param_counts(fields)
        head = (f"{SHAPES[a.device]} width (hidden {fields['hidden_size']}, "
                f"{fields['num_attention_heads']}/{fields['num_key_value_heads']} heads, "
                f"intermediate {fields['intermediate_size']}, vocabulary "
                f"{fields['vocab_size']:,}), {layers} layers, random init: "
                f"{(p['body'] + p['head']) / 1e6:.0f}M matmul parameters (head "
                f"{p['head'] / 1e6:.0f}M); device {a.device}, 1 thread per process on cpu")
        print(head, file=sys.stderr, flush=True)
        env = dict(QUIET_ONE_THREAD_ENV)
        if a.device == "cuda":
            env = {k: v for k, v in env.items() if not k.endswith("_NUM_THREADS")}
        work = Path(tmp) / "work"
        work.mkdir()
        def save():
            if a.json:
                Path(a.json).write_text(json.dumps(raw, indent=1, default=str))

        if "grpo" in parts:
            raw["grpo"] = run_grpo(a, model_dir, work)
            save()
        for part in ("machine", "decode"):
            if part not in parts:
                continue
            raw["machine"] = []
            for dtype in a.dtypes:
                for side in ("mindrl",) + ((BASE,) if a.update_baseline else ()):
                    print(f"[bench] {part} {dtype} {side} ... load {loadavg():.2f}",
                          file=sys.stderr, flush=True)
                    cmd = [sys.executable, __file__, "--worker", part, "--model",
                           str(model_dir), "--dtype", dtype, "--device", a.device, "--side",
                           side]
                    r = run_worker(cmd + (["--quick"] if a.quick else []),
                                   what=f"{part} {dtype}", cwd=work, timeout=a.timeout,
                                   env=env, repo=REPO)
                    r.update(load=f"{r['load_before']:.1f}-{r['load_after']:.1f}", side=side)
                    raw["machine"].append(r)
                    save()
        if "mindspore" in parts:
            print(f"[bench] mindspore vs torch ... load {loadavg():.2f}", file=sys.stderr,
                  flush=True)
            cmd = [sys.executable, __file__, "--worker", "mindspore", "--model", str(model_dir),
                   "--ms-rows", a.ms_rows]
            try:
                raw["mindspore"] = run_worker(cmd + (["--quick"] if a.quick else []),
                                              what="mindspore", cwd=work, timeout=a.timeout,
                                              env=env, repo=REPO)
            except RuntimeError as e:              # its output tail is on stderr already
                print(f"[bench] {e}", file=sys.stderr)
    raw["load_end"] = loadavg()
    raw["wall_s"] = time.perf_counter() - t_start
    if a.json:
        Path(a.json).write_text(json.dumps(raw, indent=1, default=str))
    print(render(raw, a, head))
    return 0


def render(raw: dict, a, head: str) -> str:
    lines = [head, f"load (1-min average) at start {raw['load_start']:.2f}, at end "
             f"{raw['load_end']:.2f}; wall {raw['wall_s']:.0f} s", ""]
    lines += ["| figure | mindrl | reference | ratio | target | verdict | load |",
              "|---|---|---|---|---|---|---|"]
    grpo = grpo_rows(raw["grpo"], a) if raw.get("grpo") else []
    for g in grpo:
        lines.append(
            f"| GRPO step, {g['dtype']} (s/step; response tokens/s; peak RSS) | "
            f"{g['s_mindrl']:.2f} s; {g['tps_mindrl']:.0f} tok/s; {g['rss_mindrl']:.0f} MB | "
            f"TRL {g['s_trl']:.2f} s; {g['tps_trl']:.0f} tok/s; {g['rss_trl']:.0f} MB | "
            f"**{g['ratio']:.2f}x** | <= {TARGETS['grpo']}x | {g['verdict']} | {g['load']} |")
        if g["base_ratio"] is not None:
            lines.append(
                f"| GRPO step, {g['dtype']}, update's fused paths off | {g['s_' + BASE]:.2f} s "
                f"| TRL {g['s_trl']:.2f} s | {g['base_ratio']:.2f}x | <= {TARGETS['grpo']}x | "
                f"{verdict(g['base_ratio'], TARGETS['grpo'], False)} | {g['load']} |")
    mach = machine_rows(raw["machine"], a) if raw.get("machine") else []
    for m in mach:
        if m["mfu"] is not None:
            lines.append(
                f"| update FLOP/s, {m['dtype']}{m['label']} ({m['tokens']} tokens, "
                f"{m['update_s']:.2f} s) | "
                f"{m['achieved'] / 1e9:.1f} GFLOP/s | GEMM at the model's shapes "
                f"{m['gemm'] / 1e9:.1f} GFLOP/s | **{m['mfu']:.0%}** | >= 60% | "
                f"{m['mfu_verdict']} | {m['load']} |")
        if m["label"]:                         # the decode loop is the same code
            continue
        lines.append(
            f"| decode tokens/s, batch 1, {m['dtype']} | {m['decode1']:.1f} tok/s | "
            f"bandwidth bound {m['bound1']:.1f} tok/s ({m['bandwidth'] / 1e9:.1f} GB/s over "
            f"{m['weight_bytes'] / 1e6:.0f} MB) | **{m['decode_frac']:.0%}** | >= 50% | "
            f"{m['decode_verdict']} | {m['load']} |")
    ms = raw.get("mindspore")
    if ms:
        load = f"{ms['load_before']:.1f}-{ms['load_after']:.1f}"
        if ms.get("train_skipped"):
            pass
        elif ms.get("ms_step_s"):
            r1 = ms["ms_step_s"] / ms["torch_step_s"]
            lines.append(
                f"| MindSpore train step, float32, {ms['batch']} ({ms['ms_mode']}; compile "
                f"{ms['compile_s']:.0f} s) | {ms['ms_step_s']:.2f} s | torch "
                f"{ms['torch_step_s']:.2f} s | **{r1:.2f}x** | <= 1.0x | "
                f"{verdict(r1, 1.0, False)} | {load} |")
        else:
            lines.append(
                f"| MindSpore train step, float32, {ms['batch']} | stopped: process RSS passed "
                f"{ms['guard_mb'] / 1e3:.0f} GB during {ms.get('guard_tripped', '?')} | torch "
                f"{ms.get('torch_step_s', float('nan')):.2f} s | - | <= 1.0x | target missed "
                f"| {load} |")
        if ms.get("ms_tps"):
            r2 = ms["torch_tps"] / ms["ms_tps"]
            lines.append(
                f"| MindSpore sampler, float32, {ms['sampler']} (time per token) | "
                f"{ms['ms_tps']:.1f} tok/s | torch {ms['torch_tps']:.1f} tok/s | "
                f"**{r2:.2f}x** | <= 1.0x | {verdict(r2, 1.0, False)} | {load} |")
    for g in grpo:
        lines.append("")
        for side in ("mindrl", "trl"):
            ph = g[f"phases_{side}"]
            keys = [k for k in ph if k.startswith("time/") and k != "time/step"]
            lines.append(f"- GRPO {g['dtype']} {side}: {g[f's_{side}']:.2f} s/step "
                         f"({g[f'min_{side}']:.2f}-{g[f'max_{side}']:.2f}), CPU "
                         f"{g[f'cpu_{side}']:.2f} s; " +
                         ", ".join(f"{k[5:]} {ph[k]:.2f}" for k in keys))
    for m in mach:
        if m["by_shape"]:
            lines.append(f"- {m['dtype']} GEMM GFLOP/s by shape (fwd + 2 bwd matmuls): " +
                         ", ".join(f"{k} {v / 1e9:.0f}" for k, v in m["by_shape"].items()))
        for rows, d in m["decode_batch"].items():
            lines.append(f"- {m['dtype']} decode at batch {rows}: {d['tokens_per_s']:.1f} "
                         f"tok/s (2-token call {d['prefill_s']:.2f} s, {d['call_s']:.2f} s "
                         "for all)")
        if m.get("pack_s") is not None:
            lines.append(f"- {m['dtype']} packing every linear weight: {m['pack_s']:.2f} s, once "
                         "per call that packs (float32 packs from 2 live rows up)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
