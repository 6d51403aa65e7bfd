"""Where an RL step's time goes inside the model: attention against the rest, per phase
(``bench/scaling.py --breakdown``).

torch: one extra step (after the measured ones, not counted in their times) runs under
``torch.profiler``; every operator's self CPU time goes to a group by the innermost labelled
range around it:

    attention core     the attention function (SDPA: Q K^T, softmax, P V; repeat_kv)
    kv cache           the KV cache's update (``DynamicLayer.update``)
    attention mask     the mask builder (``create_causal_mask``)
    attention other    the rest of the attention module outside its projections (RoPE, views)
    linear             q/k/v/o projections, the MLP, the LM head
    other              embedding, norms, sampling, loss, optimizer, Python-side glue

and to a phase by the range around the call: ``generation`` (the engine's ``generate``) or
``update`` (the backend's ``train_step``: forward, backward, optimizer). Backward operators
inherit the group of the forward operator that recorded them (autograd sequence numbers).
The shares are of profiled operator time; the profiler's own per-operator cost inflates small
operators alike, so read shares, not seconds.

MindSpore: the compiled decode step is timed directly at a fixed row count for each
(prompt bucket + response bucket) slot count the grid uses: its attention reads every slot of
its cache at every step, so its cost per step against the slot count is the attention cost;
a step reads the slots of the cache's size then (it grows through the response buckets,
:func:`mindspore_decode_slots`).

Analytic FLOPs (:func:`flops`): 2 per multiply-add; attention = Q K^T + P V over the keys a
query sees (decode: the cache so far for torch, every slot of its cache for MindSpore; the
update: causal, per row, backward 2x forward); linear = 2 x the matmul parameters per token.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Dict

GROUPS = ("attention core", "kv cache", "attention mask", "attention other", "linear", "other")
ATTENTION_GROUPS = GROUPS[:4]
PHASES = ("generation", "update")
_LABEL = "mindrl_bp:"


def install_torch_labels(trainer) -> None:
    """Labelled ``record_function`` ranges around the model's parts and the step's phases (a
    no-op cost when no profiler runs)."""
    import torch
    from transformers import cache_utils
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    rf = torch.autograd.profiler.record_function

    def wrap(fn, label):
        def wrapped(*a, **k):
            with rf(_LABEL + label):
                return fn(*a, **k)
        wrapped.__wrapped__ = fn
        return wrapped

    def hook_module(module, label):
        state = []

        def pre(mod, args):
            r = rf(_LABEL + label)
            r.__enter__()
            state.append(r)

        def post(mod, args, out):
            state.pop().__exit__(None, None, None)

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)

    models = {id(m): m for m in (getattr(trainer.engine, "model", None),
                                 getattr(trainer.backend, "model", None)) if m is not None}
    for model in models.values():
        impl = model.config._attn_implementation
        ALL_ATTENTION_FUNCTIONS[impl] = wrap(ALL_ATTENTION_FUNCTIONS[impl], "attention core")
        mod = __import__(type(model).__module__, fromlist=["create_causal_mask"])
        if hasattr(mod, "create_causal_mask") and not hasattr(mod.create_causal_mask,
                                                              "__wrapped__"):
            mod.create_causal_mask = wrap(mod.create_causal_mask, "attention mask")
        for name, m in model.named_modules():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "self_attn":
                hook_module(m, "attention other")
            elif leaf in ("q_proj", "k_proj", "v_proj", "o_proj", "mlp", "lm_head"):
                hook_module(m, "linear")
    cache_utils.DynamicLayer.update = wrap(cache_utils.DynamicLayer.update, "kv cache")
    trainer.engine.generate = wrap(trainer.engine.generate, "phase generation")
    trainer.backend.train_step = wrap(trainer.backend.train_step, "phase update")


def torch_op_shares(prof) -> Dict[str, Dict[str, float]]:
    """{phase: {group: seconds of operator self CPU time}} from a finished profiler."""
    events = prof.events()
    group_of_seq: Dict[int, str] = {}
    out: Dict[str, Dict[str, float]] = {p: defaultdict(float) for p in PHASES + ("outside",)}

    def labels(ev):
        group = phase = None
        e = ev
        while e is not None:
            if group is None and "scaled_dot_product" in e.name:    # SDPA, however reached
                group = "attention core"
            if e.name.startswith(_LABEL):
                lab = e.name[len(_LABEL):]
                if lab.startswith("phase "):
                    phase = phase or lab[6:]
                else:
                    group = group or lab
            e = e.cpu_parent
        return group, phase

    # forward ops first: the group each autograd sequence number was recorded under
    for ev in events:
        if ev.name.startswith(_LABEL) or ev.name.startswith("autograd::engine"):
            continue
        group, _ = labels(ev)
        if group is not None and getattr(ev, "sequence_nr", -1) >= 0:
            group_of_seq.setdefault(ev.sequence_nr, group)
    for ev in events:
        if ev.name.startswith(_LABEL):
            continue
        group, phase = labels(ev)
        if group is None:                       # a backward op: the group of its forward op
            e = ev
            while e is not None:
                if "ScaledDotProduct" in e.name:
                    group = "attention core"
                    break
                if e.name.startswith("autograd::engine::evaluate_function"):
                    group = group_of_seq.get(getattr(e, "sequence_nr", -1))
                    break
                e = e.cpu_parent
        out[phase or "outside"][group or "other"] += ev.self_cpu_time_total / 1e6
    return {p: dict(g) for p, g in out.items()}


def profile_torch_step(run_step):
    """Run ``run_step()`` once under the profiler: (its result, its operator seconds per phase
    and group)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        result = run_step()
    return result, torch_op_shares(prof)


def time_mindspore_decode(trainer, slots, rows: int = 8, repeats: int = 200) -> Dict[int, float]:
    """{slots: median ms of one compiled decode step of ``rows`` rows over a cache of ``slots``
    slots} (the sampler's own graph, its cache half written)."""
    import numpy as np
    from mindspore import Tensor

    sampler = trainer.engine                               # a MindSporeSampler
    spec = sampler.model.spec
    Nq, Nk, D = spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim
    dt = sampler.model.compute_dtype
    calls = {}
    for S in slots:
        cache = sampler._ready(rows, S)
        ids = np.zeros(rows, np.int32)
        cos = np.ones((rows, D), np.float32)
        sin = np.zeros((rows, D), np.float32)
        bias = np.zeros((rows, 1, 1, S), np.float32)
        bias[..., S // 2:] = -1e9
        idx = np.zeros((rows, Nk, 3), np.int32)
        idx[:, :, 0] = np.arange(rows)[:, None]
        idx[:, :, 1] = np.arange(Nk)[None, :]
        idx[:, :, 2] = S // 2
        args = (Tensor(ids), Tensor(np.tile(cos, Nq), dt), Tensor(np.tile(sin, Nq), dt),
                Tensor(np.tile(cos, Nk), dt), Tensor(np.tile(sin, Nk), dt), Tensor(bias),
                Tensor(idx))
        for _ in range(3):                                  # compile, warm up
            cache.decode(*args).asnumpy()
        calls[S] = (cache.decode, args)
    times = {S: [] for S in slots}
    # the sizes interleaved in blocks, so load drift hits all alike; within a block the same
    # graph runs back to back, as in sampling (the first calls after a switch are dropped: a
    # switch between graphs costs far more than a step)
    for _ in range(max(1, repeats // 20)):
        for S, (fn, args) in calls.items():
            for j in range(23):
                t0 = time.perf_counter()
                fn(*args).asnumpy()
                if j >= 3:
                    times[S].append(time.perf_counter() - t0)
    return {S: 1e3 * _median(t) for S, t in times.items()}


def time_mindspore_generate(trainer, prompt_len: int, rows: int, lengths,
                            repeats: int = 3) -> Dict[int, float]:
    """{length: median ms per decode step of the MindSpore sampler's whole ``generate`` (8
    rows: the compiled step, the host's sampling, the cache bucket of that length), the
    lengths interleaved ``repeats`` times in one process so load drift hits all alike."""
    from mindrl.types import SamplingParams

    from mindrl.backends.mindspore.buckets import default_buckets

    sampler = trainer.engine
    sampler.response_buckets = sorted(set(sampler.response_buckets)   # each length its own
                                      | set(default_buckets(max(lengths))))
    prompts = [[5 + i] * prompt_len for i in range(rows // 4)]
    for L in lengths:                                               # compile
        sampler.generate(prompts, SamplingParams(n=4, max_new_tokens=L))
    times = {L: [] for L in lengths}
    for _ in range(repeats):
        for L in lengths:
            t0 = time.perf_counter()
            sampler.generate(prompts, SamplingParams(n=4, max_new_tokens=L))
            times[L].append(1e3 * (time.perf_counter() - t0) / L)
    return {L: _median(t) for L, t in times.items()}


def time_torch_decode(model, prompt_len: int, rows: int, lengths) -> Dict[int, float]:
    """{context: median process-CPU ms of one decode step of ``rows`` rows (the native engine's
    loop, :func:`mindrl.rollout.torch_decode.decode`) over the 32 steps before the cache holds
    ``context`` = prompt + length tokens}, for each of ``lengths``, from one call that decodes
    the longest (no stop token)."""
    import torch

    from mindrl.rollout.torch_decode import decode

    stamps = []
    old = getattr(model, "mindrl_logits_hook", None)

    def hook(_rows):
        def step(_ids, _t, logits):
            stamps.append(time.process_time())
            return logits
        return step

    model.mindrl_logits_hook = hook
    try:
        with torch.inference_mode():
            decode(model, [[5] * prompt_len] * (rows // 4), 4, max(lengths), [], 0, 1.0)
    finally:
        model.mindrl_logits_hook = old
    ms = [1e3 * (b - a) for a, b in zip(stamps, stamps[1:])]
    return {prompt_len + L: _median(ms[max(0, L - 33):L - 1]) for L in lengths}


def flops(layers: int, heads: int, head_dim: int, matmul_params: int, rows: int, prompt: int,
          length: int, decode_slots=None) -> Dict[str, float]:
    """Analytic FLOPs of one step's model work: generation (prefill + decode) and the update
    (forward + backward = 3x forward), each split into attention and linear. ``decode_slots``:
    keys every decode query reads (MindSpore's cache, mean over the steps); None = the cache so far (torch)."""
    per_key = 2 * 2 * layers * heads * head_dim          # Q K^T and P V, 2 FLOPs per MAC
    prefill_keys = prompt * (prompt + 1) / 2
    if decode_slots is None:
        decode_keys = sum(prompt + t for t in range(length))
    else:
        decode_keys = length * decode_slots
    seq = prompt + length
    return {
        "generation attention": rows * per_key * (prefill_keys + decode_keys),
        "generation linear": rows * 2 * matmul_params * (prompt + length),
        "update attention": 3 * rows * per_key * seq * (seq + 1) / 2,
        "update linear": 3 * rows * 2 * matmul_params * seq,
    }


def tiny_dims() -> Dict[str, int]:
    """The builtin tiny model's shapes (layers, query heads, head dim, matmul parameters)."""
    from mindrl.models.tiny import BUILTINS

    b = BUILTINS["tiny"]
    h, heads, kv = b["hidden"], b["heads"], b["kv_heads"]
    d, inter = h // heads, 4 * h
    per_layer = h * heads * d * 2 + h * kv * d * 2 + 3 * h * inter    # q, o; k, v; MLP
    return {"layers": b["layers"], "heads": heads, "head_dim": d,
            "matmul_params": b["layers"] * per_layer + h * b["vocab"]}


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _slope(points):
    """Least-squares (intercept, slope) of y on x."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs) or 1.0
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den
    return my - b * mx, b


def mindspore_decode_slots(prompt_len: int, length: int, grow_from: int = 64) -> float:
    """Mean slots one MindSpore decode step reads over a ``length``-token response: its cache
    grows through prompt bucket + each response bucket from the one holding ``grow_from``
    tokens (the sampler's default), so step t reads the size holding slot P + t."""
    from mindrl.backends.mindspore.buckets import cache_growth, default_buckets
    from mindrl.types import bucket

    P = bucket(prompt_len, default_buckets(512))
    sizes = cache_growth(P, length, default_buckets(length), grow_from)
    return sum(next(s for s in sizes if P + t < s) for t in range(length)) / length


def attention_estimates(r, prompts: int, decode_fit=None) -> Dict[str, float]:
    """Seconds per step: each phase, and the attention part of generation and the update
    (torch: profiled shares of the phase; MindSpore: generation only, the slot-proportional
    part of the compiled decode step, ``decode_fit`` = (intercept ms, ms per slot))."""
    ph = r["phases"]
    out = {"step": r["median_s"], "generation": ph.get("time/rollout", 0.0),
           "old log-probs": ph.get("time/old_logprobs", 0.0),
           "update fwd/bwd": ph.get("time/train_fwd_bwd", 0.0),
           "optimizer": ph.get("time/optimizer", 0.0)}
    out["scoring/other"] = max(0.0, out["step"] - sum(
        out[k] for k in ("generation", "old log-probs", "update fwd/bwd", "optimizer")))
    upd = out["update fwd/bwd"] + out["optimizer"]
    if r.get("op_seconds"):
        shares = {}
        for phase in PHASES:
            fr = []
            for ops_ in r["op_seconds"]:
                g = ops_.get(phase, {})
                tot = sum(g.values()) or 1.0
                fr.append(sum(g.get(k, 0.0) for k in ATTENTION_GROUPS) / tot)
                for k in GROUPS:
                    shares.setdefault((phase, k), []).append(g.get(k, 0.0) / tot)
            out[f"{phase} attention share"] = _median(fr)
        out["groups"] = {k: _median(v) for k, v in shares.items()}
        out["generation attention"] = out["generation attention share"] * out["generation"]
        out["update attention"] = out["update attention share"] * upd
    elif decode_fit is not None and r.get("prompt_len"):
        S = mindspore_decode_slots(r["prompt_len"], r["length"])
        out["generation attention"] = r["length"] * decode_fit[1] * S / 1e3
    return out


def render_breakdown(results, prompts: int) -> str:
    """The per-phase, attention-vs-rest table of the length axis, and the flatness verdicts."""
    dims = tiny_dims()
    lines = ["Per phase, s/step (share of the step); attention = the attention parts of "
             "generation and the update (torch: profiled operator shares of each phase; "
             "MindSpore: generation only, from the compiled decode step's cost per cache "
             "slot); rest = step minus that attention; FLOP shares analytic.", "",
             "| backend | length | ms per 1k tokens (CPU) | generation | update fwd/bwd | "
             "optimizer | scoring/other | attention in generation | attention in update | "
             "rest, ms per 1k tokens (CPU) | attention FLOP share gen / update |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for backend in dict.fromkeys(r["backend"] for r in results):
        pts = sorted([r for r in results if r["backend"] == backend and r["axis"] == "length"],
                     key=lambda r: r["length"])
        fit = None
        slots_ms = next((r["decode_slots_ms"] for r in pts if r.get("decode_slots_ms")), None)
        if slots_ms:
            fit = _slope([(int(k), v) for k, v in slots_ms.items()])
        rest = []
        for r in pts:
            e = attention_estimates(r, prompts, fit)
            k1 = r["tokens"] / 1e3
            att = e.get("generation attention", 0.0) + e.get("update attention", 0.0)
            cpu = r.get("cpu_s", e["step"]) / e["step"]        # CPU seconds per wall second
            rest.append((r["length"], 1e3 * (e["step"] - att) / k1, 1e3 * e["step"] / k1,
                         1e3 * cpu * (e["step"] - att) / k1, 1e3 * cpu * e["step"] / k1))
            rows = r["tokens"] // r["length"]
            P = r.get("prompt_len", 0)
            slots = None
            if backend == "mindspore" and P:
                slots = mindspore_decode_slots(P, r["length"])
            f = flops(dims["layers"], dims["heads"], dims["head_dim"], dims["matmul_params"],
                      rows, P, r["length"], slots)
            fg = f["generation attention"] / (f["generation attention"] + f["generation linear"])
            fu = f["update attention"] / (f["update attention"] + f["update linear"])

            def cell(key):
                return f"{e[key]:.3f} ({100 * e[key] / e['step']:.0f}%)"

            ga = e.get("generation attention")
            ua = e.get("update attention")
            lines.append(
                f"| {backend} | {r['length']} | {rest[-1][2]:.0f} ({rest[-1][4]:.0f}) | "
                f"{cell('generation')} "
                f"| {cell('update fwd/bwd')} | {cell('optimizer')} | {cell('scoring/other')} | "
                + (f"{ga:.3f} ({100 * ga / max(e['generation'], 1e-9):.0f}% of it)"
                   if ga is not None else "-") + " | "
                + (f"{ua:.3f} ({100 * ua / max(e['update fwd/bwd'] + e['optimizer'], 1e-9):.0f}"
                   "% of it)" if ua is not None else "not split") + " | "
                f"{rest[-1][1]:.0f} ({rest[-1][3]:.0f}) | {100 * fg:.0f}% / {100 * fu:.0f}% |")
        if len(rest) > 1:
            verdicts.append(
                f"- {backend}: ms per 1k response tokens {rest[0][2]:.0f} -> {rest[-1][2]:.0f} "
                f"({rest[-1][2] / rest[0][2]:.2f}x) from {rest[0][0]} to {rest[-1][0]} tokens; "
                f"without the attention counted: {rest[0][1]:.0f} -> {rest[-1][1]:.0f} "
                f"({rest[-1][1] / rest[0][1]:.2f}x, max/min over the lengths "
                f"{max(x[1] for x in rest) / min(x[1] for x in rest):.2f}x); in CPU time "
                f"{rest[0][4]:.0f} -> {rest[-1][4]:.0f} ({rest[-1][4] / rest[0][4]:.2f}x), "
                f"without the attention {rest[0][3]:.0f} -> {rest[-1][3]:.0f} "
                f"({rest[-1][3] / rest[0][3]:.2f}x, max/min "
                f"{max(x[3] for x in rest) / min(x[3] for x in rest):.2f}x)")
        rows = pts[0]['tokens'] // pts[0]['length']
        for key, what in (("decode_context_ms", f"decode step ({rows} rows, the native engine's "
                                                "loop), process-CPU ms by tokens in the cache"),
                          ("generate_ms", "sampler's generate alone (8 rows, lengths "
                                          "interleaved), ms per decode step by response length")):
            ms = next((r[key] for r in pts if r.get(key)), None)
            if ms:
                verdicts.append(f"- {backend} {what}: "
                                + ", ".join(f"{k}: {v:.2f}" for k, v in ms.items()))
        if slots_ms:
            verdicts.append(
                f"- {backend} compiled decode step, {pts[0]['tokens'] // pts[0]['length']} rows, "
                "ms by cache slots: " + ", ".join(f"{k}: {v:.2f}" for k, v in slots_ms.items())
                + f" (fit: {fit[0]:.2f} ms + {1e3 * fit[1]:.2f} us per slot)")
        for r in pts:
            e = attention_estimates(r, prompts, fit)
            if "groups" in e:
                g = e["groups"]
                verdicts.append(
                    f"- {backend} {r['length']}: operator time by group, generation / update: "
                    + ", ".join(f"{k} {100 * g[('generation', k)]:.0f}/"
                                f"{100 * g[('update', k)]:.0f}%" for k in GROUPS))
    return "\n".join(lines + [""] + verdicts)
