"""The MindSpore training backend: the Qwen2 Cell of ``model.py``, compiled (``mindspore.jit``)
scoring and training steps over length buckets, the AdamW of ``optim.py``, and data
parallelism under ``msrun``.

Static shapes: every batch is re-padded to (rows, prompt bucket, response bucket) before it
reaches a compiled function -- rows to ``train.micro_batch_size`` (all-padding rows have an
empty response mask), the prompt (left) and response (right) lengths to the smallest bucket
that fits -- so a run compiles each function once per bucket pair, never once per batch
(PLATFORM.md: each new shape recompiles, 1.4-1.7 s). ``compile_count`` counts the distinct
train-step shapes; ``compile_counts`` every compiled function's.

Loss normalisers: ``algorithms.rl_loss`` takes them as Python numbers, which a compiled graph
would freeze as constants (one compile per value). The step therefore calls ``rl_loss`` with
unit normalisers and multiplies the result by the reciprocal of the mode's normaliser, given as
a tensor input. That is exact because every aggregation mode is (a sum) / (one normaliser) and
the KL and entropy terms share it (see ``LossNormalizers.divisor``).

Data parallelism: under ``msrun`` (``MS_WORKER_NUM`` set) the backend calls
``mindspore.communication.init()``; the accumulated gradients are all-reduced (SUM) once per
optimizer step before clipping. The RL loss is normalised by global counts, so the sum over
ranks is the full-batch gradient (the same convention as the torch backend).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.backends.base import BACKENDS
from mindrl.backends.metrics import MetricMerger, finish
from mindrl.backends.schedule import lr_factor, total_optimizer_steps
from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.model import Qwen2ForCausalLM, Qwen2Spec
from mindrl.backends.mindspore.optim import AdamW
from mindrl.types import LossNormalizers, TokenBatch, TrainBatch, bucket

log = logging.getLogger(__name__)

DEVICE_TARGETS = {"cpu": "CPU", "ascend": "Ascend", "cuda": "GPU"}


# ------------------------------------------------------------------------------ helpers
def default_buckets(limit: int, smallest: int = 16) -> List[int]:
    """Powers of two from ``smallest`` up to and including ``limit``."""
    out, b = [], smallest
    while b < limit:
        out.append(b)
        b *= 2
    return out + [int(limit)]


def repad(batch: TokenBatch, rows: int, prompt_len: int, response_len: int,
          pad_id: int = 0) -> TokenBatch:
    """Pad a TokenBatch to ``rows`` x (``prompt_len`` + ``response_len``): prompts further left,
    responses further right, extra rows all padding (empty response mask)."""
    B, P, T = len(batch), batch.prompt_len, batch.response_len
    if B > rows or P > prompt_len or T > response_len:
        raise ValueError(f"batch {B}x({P}+{T}) exceeds the padded shape "
                         f"{rows}x({prompt_len}+{response_len})")
    S = prompt_len + response_len
    ids = np.full((rows, S), pad_id, np.int64)
    att = np.zeros((rows, S), np.int64)
    rmask = np.zeros((rows, response_len), np.float32)
    lo = prompt_len - P
    ids[:B, lo:lo + P + T] = batch.input_ids
    att[:B, lo:lo + P + T] = batch.attention_mask
    rmask[:B, :T] = batch.response_mask
    return TokenBatch(ids, att, rmask, prompt_len)


def _pad2(x: Optional[np.ndarray], rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), np.float32)
    if x is not None:
        out[:x.shape[0], :x.shape[1]] = x
    return out


def _token_logp(logits, targets):
    """(B, T) log-softmax of ``logits`` at the ``targets`` ids (traced into graphs)."""
    return ops.gather_elements(ops.log_softmax(logits, -1), 2,
                               targets.expand_dims(-1)).squeeze(-1)


def _vector(loss, aux, extra=()):
    """``[loss, *aux, *extra]`` as one float32 vector (a single host sync per call)."""
    parts = (loss.reshape((1,)),)
    for v in aux + extra:
        parts = parts + (v.astype(ms.float32).reshape((1,)),)
    return ops.concat(parts, 0)


_THREADS_SET = False


def _configure_threads(n: int, on_cpu: bool = True) -> None:
    """Size MindSpore's CPU kernel thread pool to ``train.threads`` (as the torch backend does
    with ``torch.set_num_threads``), once per process and before the first kernel runs: it is
    read when the runtime starts. On a shared 2-core machine the default pool (main thread +
    worker threads) makes a kernel wait one scheduler slice (4-8 ms) for a descheduled worker
    whenever the cores are busy; with hundreds of small kernels per step that cost 5-10x the
    step time (a train step of the tiny model: 1261 ms median vs 144 ms with one thread, same
    load)."""
    global _THREADS_SET
    if _THREADS_SET:
        return
    _THREADS_SET = True
    if on_cpu and os.environ.get("MINDRL_MS_HOST_BLOCKING", "1") == "1":
        # Run MindSpore's host pipeline (frontend -> backend -> launch queues) in the calling
        # thread instead of three queue threads: on CPU every hand-off between them waits for
        # a scheduler slice when the cores are busy, and a train step of the tiny model showed
        # bimodal 30 / 130 ms times with the queues vs a steady 25 ms without. CPU only: on
        # Ascend the queues overlap host work with device execution (untested here).
        os.environ.setdefault("MS_DEV_HOST_BLOCKING_RUN", "1")
    try:
        ms.set_context(runtime_num_threads=n)
    except (RuntimeError, ValueError, TypeError) as err:   # already started: keep the default
        log.info("could not set MindSpore runtime_num_threads=%d: %s", n, err)


def _in_msrun() -> bool:
    return "MS_WORKER_NUM" in os.environ or "MS_ROLE" in os.environ


# ------------------------------------------------------------------------------ the backend
@BACKENDS.register("mindspore")
class MindSporeBackend:
    """Policy (+ optional frozen reference) as :class:`Qwen2ForCausalLM` Cells.

    ``cfg`` is a :class:`mindrl.config.schema.RunConfig`. ``prompt_buckets`` /
    ``response_buckets`` default to powers of two up to ``data.max_prompt_len`` /
    ``rollout.max_new_tokens``.
    """

    name = "mindspore"

    def __init__(self, cfg, with_reference: bool = False, model_path: Optional[str] = None,
                 prompt_buckets: Optional[Sequence[int]] = None,
                 response_buckets: Optional[Sequence[int]] = None, train_mode: str = "fused"):
        from algorithms.ops import get_ops
        from mindrl.models.tiny import resolve_model_path

        self.cfg = cfg
        _configure_threads(max(1, int(getattr(cfg.train, "threads", 1) or 1)),
                           on_cpu=DEVICE_TARGETS.get(cfg.device, "CPU") == "CPU")
        self.ops = get_ops("mindspore")        # absorbs MindSpore's numpy-2 warm-up error
        ms.set_context(mode=ms.PYNATIVE_MODE,
                       device_target=DEVICE_TARGETS.get(cfg.device, "CPU"))
        ms.set_seed(cfg.train.seed)
        self.rank, self.world = self._init_distributed()
        self.model_path = model_path or resolve_model_path(cfg.model.path)
        if not (Path(self.model_path) / "config.json").is_file():   # tokenizer optional
            raise FileNotFoundError(f"no config.json in model directory {self.model_path}")
        self.hf_config = W.read_config(self.model_path)
        self.spec = Qwen2Spec.from_hf(self.hf_config)
        self.save_dtype = cfg.model.dtype
        on_cpu = ms.get_context("device_target") == "CPU"
        if on_cpu and cfg.model.dtype != "float32":
            log.warning("model.dtype=%s: MindSpore has no CPU kernels for bf16/fp16 MatMul; "
                        "computing in float32 (checkpoints are still written as %s)",
                        cfg.model.dtype, cfg.model.dtype)
        self.dtype = ms.float32 if on_cpu else {"float32": ms.float32, "bfloat16": ms.bfloat16,
                                                "float16": ms.float16}[cfg.model.dtype]
        self.model = self._load_model(self.model_path)
        self.reference = None
        if with_reference:
            self.reference = self._load_model(self.model_path)
            for p in self.reference.get_parameters():
                p.requires_grad = False
        self.tokenizer = self._load_tokenizer(self.model_path)
        self.pad_id = 0
        if self.tokenizer is not None:
            pid = self.tokenizer.pad_token_id
            self.pad_id = pid if pid is not None else (self.tokenizer.eos_token_id or 0)

        self.prompt_buckets = sorted(prompt_buckets or default_buckets(cfg.data.max_prompt_len))
        self.response_buckets = sorted(response_buckets or
                                       default_buckets(cfg.rollout.max_new_tokens))
        self.params = self.model.trainable_params()
        t = cfg.train
        reducer = ops.AllReduce(ops.ReduceOp.SUM) if self.world > 1 else None
        self.optimizer = AdamW(self.params, betas=tuple(t.betas), eps=t.adam_eps,
                               weight_decay=t.weight_decay, all_reduce=reducer)
        self.total_steps = total_optimizer_steps(cfg)
        self.optimizer_steps = 0
        self.skipped_steps = 0
        self.compile_counts: Dict[str, int] = {}
        self.compile_seconds: Dict[str, float] = {}
        self._seen: Dict[str, set] = {}
        self._train_fns: Dict[Tuple, object] = {}     # compiled steps by (loss, flags, ...)
        self._loss_acc = ms.Parameter(Tensor(np.zeros(1, np.float32)), name="train.loss_acc",
                                      requires_grad=False)
        self.train_mode = train_mode           # "fused" (rl_loss in the graph) or "split"
        self.fallback_reason: Optional[str] = None
        self._logp_fns = {False: ms.jit(self._make_logp_fn(self.model)),
                          True: ms.jit(self._make_logp_fn(self.reference))
                          if self.reference is not None else None}
        self._engine = None

    # ------------------------------------------------------------------ set-up
    def _init_distributed(self) -> Tuple[int, int]:
        if not _in_msrun():
            return 0, 1
        from mindspore.communication import get_group_size, get_rank, init

        init()
        return get_rank(), get_group_size()

    @property
    def world_size(self) -> int:
        return self.world

    def _load_model(self, directory: str) -> Qwen2ForCausalLM:
        model = Qwen2ForCausalLM(self.spec, dtype=self.dtype)
        W.load_into(model, W.iter_checkpoint(directory))
        return model

    @staticmethod
    def _load_tokenizer(directory: str):
        names = ("tokenizer.json", "tokenizer_config.json", "vocab.json")
        if not any((Path(directory) / n).is_file() for n in names):
            return None
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(directory, local_files_only=True)

    # ------------------------------------------------------------------ shapes
    def _shape(self, batches: Sequence[TokenBatch], rows: int) -> Tuple[int, int, int]:
        P = max(b.prompt_len for b in batches)
        T = max(b.response_len for b in batches)
        return rows, bucket(P, self.prompt_buckets), bucket(T, self.response_buckets)

    def _note_compile(self, fn: str, key) -> bool:
        seen = self._seen.setdefault(fn, set())
        if key in seen:
            return False
        seen.add(key)
        self.compile_counts[fn] = len(seen)
        return True

    @property
    def compile_count(self) -> int:
        """Distinct shapes the compiled train step has seen (= its compilations)."""
        return self.compile_counts.get("train_step", 0)

    def _inputs(self, tb: TokenBatch):
        return (Tensor(tb.input_ids.astype(np.int32)), Tensor(tb.position_ids.astype(np.int32)),
                Tensor(tb.attention_mask.astype(np.float32)),
                Tensor(tb.input_ids[:, tb.prompt_len:].astype(np.int32)),
                Tensor(tb.response_mask.astype(np.float32)))

    def _timed(self, fn_name: str, key, fn, *args):
        import time

        first = self._note_compile(fn_name, key)
        t0 = time.perf_counter()
        out = fn(*args)
        if first:
            leaf = out[0] if isinstance(out, tuple) else out
            leaf.asnumpy()                                   # wait for the result
            self.compile_seconds[fn_name] = self.compile_seconds.get(fn_name, 0.0) + \
                time.perf_counter() - t0
        return out

    # ------------------------------------------------------------------ scoring
    def _make_logp_fn(self, model):
        if model is None:
            return None

        def logp_fn(ids, pos, att, targets, mask, inv_temp):
            T = targets.shape[1]
            logits = model.response_logits(ids, pos, att, T) * inv_temp
            return _token_logp(logits, targets) * mask
        return logp_fn

    def logprobs(self, batch: TokenBatch, *, temperature: float, reference: bool = False,
                 micro_batch_size: int = 8) -> np.ndarray:
        """(B, T) float32 log-probs of the response tokens under logits / temperature
        (temperature 0 = 1); 0 at padding. Scored in micro-batches padded to buckets."""
        fn = self._logp_fns[bool(reference)]
        if fn is None:
            raise RuntimeError("reference log-probs need MindSporeBackend(cfg, "
                               "with_reference=True) (algorithm.kl.coef > 0)")
        inv_temp = Tensor(np.float32(1.0 / (temperature if temperature > 0 else 1.0)))
        rows = max(1, min(micro_batch_size, len(batch)))
        _, P, T = self._shape([batch], rows)
        out = []
        for s in range(0, len(batch), rows):
            mb = batch.rows(slice(s, s + rows))
            tb = repad(mb, rows, P, T, self.pad_id)
            name = "ref_logprobs" if reference else "logprobs"
            lp = self._timed(name, (rows, P, T), fn, *self._inputs(tb), inv_temp).asnumpy()
            out.append(lp[:len(mb), :batch.response_len])
        return np.concatenate(out).astype(np.float32)

    # ------------------------------------------------------------------ training
    def _metric_keys(self, has_old: bool, has_ref: bool, has_roll: bool) -> List[str]:
        """The metric names ``rl_loss`` returns for this configuration (a NumPy dry run)."""
        from algorithms.ops import get_ops
        from algorithms.rl_loss import rl_loss

        npo = get_ops("numpy")
        z = np.zeros((1, 2))
        _, metrics = rl_loss(npo, logp=z, old_logp=z, advantages=z, response_mask=z + 1,
                             ref_logp=z if has_ref else None,
                             rollout_logp=z if has_roll else None, entropy=z,
                             cfg=self.cfg.algorithm, global_tokens=1.0, global_seqs=1.0,
                             max_len=1.0)
        return sorted(metrics)

    def _fused_step(self, key, loss_fn, update: bool):
        """Compile ``loss_fn(*inputs) -> (loss, aux tuple)`` into a micro-batch step (cached
        under ``key``), shared by every loss (RL, SFT, preference).

        Without ``update``: ``fn(*inputs) -> [loss, *aux]``, the gradient w.r.t. the policy
        parameters added to the flat accumulator and the loss to ``_loss_acc``, one float32
        vector (one host sync). With ``update`` (fused mode, one rank): ``fn(*inputs, hyper)``
        also runs the whole optimizer step in the same graph -- total gradient = accumulator +
        this micro-batch's, norm, finite check (norm and total loss), clip, AdamW (``hyper`` =
        lr, clip, bias corrections) -- and returns ``[loss, *aux, grad_norm, updated]``."""
        if key in self._train_fns:
            return self._train_fns[key]
        accumulate = self.optimizer.accumulate_in_graph
        flatten = self.optimizer.flatten
        update_fn = self.optimizer.update_in_graph
        grad_flat = self.optimizer.grad_flat
        loss_acc = self._loss_acc
        grad_fn = ms.value_and_grad(loss_fn, None, self.params, has_aux=True)

        if not update:
            def step(*inputs):
                (loss, aux), grads = grad_fn(*inputs)
                accumulate(grads)                            # gradient accumulation, in graph
                ops.assign_add(loss_acc, loss.reshape((1,)))
                return _vector(loss, aux)
        else:
            def step(*args):
                inputs, hyper = args[:-1], args[-1]
                (loss, aux), grads = grad_fn(*inputs)
                g = grad_flat.value() + flatten(grads)
                total_loss = (loss_acc.value() + loss.reshape((1,))).sum()
                norm, updated = update_fn(g, total_loss, hyper[0], hyper[1], hyper[2], hyper[3])
                ops.assign(loss_acc, ops.zeros_like(loss_acc))
                return _vector(loss, aux, (norm, updated))

        self._train_fns[key] = ms.jit(step)
        return self._train_fns[key]

    def _train_fn(self, has_old: bool, has_ref: bool, has_roll: bool, update: bool = False):
        """The compiled RL micro-batch step for this combination of optional inputs:
        ``fn(ids, pos, att, targets, mask, adv, old, ref, roll, inv_norm[, hyper]) -> vector``
        (``[loss, *metrics]`` in ``keys`` order, plus ``[grad_norm, updated]`` with ``update``;
        see :meth:`_fused_step`). Returns (fn, keys)."""
        from algorithms.entropy import entropy_from_logits
        from algorithms.rl_loss import rl_loss

        o, acfg = self.ops, self.cfg.algorithm
        keys = self._metric_keys(has_old, has_ref, has_roll)
        ent_grad = bool(acfg.entropy_coef)
        model = self.model
        temp = self.cfg.rollout.temperature
        inv_temp = 1.0 / (temp if temp > 0 else 1.0)   # the rollout's temperature, a constant

        def token_logp_entropy(ids, pos, att, targets):
            logits = model.response_logits(ids, pos, att, targets.shape[1]) * inv_temp
            logp = _token_logp(logits, targets)                                # (B, T)
            entropy = entropy_from_logits(o, logits if ent_grad else ops.stop_gradient(logits))
            return logp, entropy

        def loss_from(logp, entropy, mask, adv, old, ref, roll, inv_norm):
            loss, metrics = rl_loss(
                o, logp=logp, old_logp=old if has_old else ops.stop_gradient(logp),
                advantages=adv, response_mask=mask, ref_logp=ref if has_ref else None,
                rollout_logp=roll if has_roll else None, entropy=entropy, cfg=acfg,
                global_tokens=1.0, global_seqs=1.0, max_len=1.0)
            out = ()
            for k in keys:
                v = metrics[k] * inv_norm if k == "pg_loss" else metrics[k]
                out = out + (ops.stop_gradient(v),)
            return loss * inv_norm, out

        if self.train_mode == "fused":
            def loss_fn(ids, pos, att, targets, mask, adv, old, ref, roll, inv_norm):
                logp, entropy = token_logp_entropy(ids, pos, att, targets)
                return loss_from(logp, entropy, mask, adv, old, ref, roll, inv_norm)

            key = ("rl", has_old, has_ref, has_roll, update)
            return self._fused_step(key, loss_fn, update), keys

        key = ("rl", has_old, has_ref, has_roll, "split")
        if key in self._train_fns:
            return self._train_fns[key], keys
        # split: compiled forward; rl_loss and its gradient w.r.t. (logp, entropy) in PyNative;
        # compiled backward of the surrogate sum(logp * dL/dlogp + entropy * dL/dH).
        accumulate = self.optimizer.accumulate_in_graph
        forward = ms.jit(token_logp_entropy)
        loss_grad = ms.value_and_grad(loss_from, (0, 1), None, has_aux=True)

        def surrogate(ids, pos, att, targets, g_logp, g_ent):
            logp, entropy = token_logp_entropy(ids, pos, att, targets)
            return (logp * g_logp).sum() + (entropy * g_ent).sum()

        sur_grad = ms.grad(surrogate, None, self.params)

        @ms.jit
        def backward(ids, pos, att, targets, g_logp, g_ent):
            grads = sur_grad(ids, pos, att, targets, g_logp, g_ent)
            accumulate(grads)
            return g_logp.sum()

        def step(ids, pos, att, targets, mask, adv, old, ref, roll, inv_norm):
            logp, entropy = forward(ids, pos, att, targets)
            (loss, aux), (g_logp, g_ent) = loss_grad(logp, entropy, mask, adv, old, ref, roll,
                                                    inv_norm)
            backward(ids, pos, att, targets, g_logp, g_ent)
            return ops.concat([loss.reshape((1,))] + [v.reshape((1,)) for v in aux], 0)

        self._train_fns[key] = step
        return step, keys

    def _sft_fn(self, update: bool = False):
        """The compiled SFT micro-batch step ``fn(ids, pos, att, targets, mask, inv_norm[,
        hyper])``: loss = sum(mask * -logp) * inv_norm (``algorithms.sft_nll``, token mean over
        the global token count given as its reciprocal), logits at temperature 1; aux = this
        micro-batch's mean NLL. Returns (fn, ["nll"])."""
        from algorithms.preference import sft_nll

        o, model = self.ops, self.model

        def loss_fn(ids, pos, att, targets, mask, inv_norm):
            logp = _token_logp(model.response_logits(ids, pos, att, targets.shape[1]), targets)
            loss = sft_nll(o, logp, mask, "token_mean", global_tokens=1.0) * inv_norm
            nll = -(logp * mask).sum() / ops.maximum(mask.sum(), 1.0)
            return loss, (ops.stop_gradient(nll),)

        return self._fused_step(("sft", update), loss_fn, update), ["nll"]

    def _pref_fn(self, has_ref: bool, update: bool = False):
        """The compiled preference micro-batch step ``fn(chosen ids, pos, att, targets, mask,
        rejected ids, pos, att, targets, mask, ref_chosen, ref_rejected, inv_pairs[, hyper])``:
        ``algorithms.preference_loss`` (cfg.preference: DPO / IPO / SimPO + pref_ftx x SFT) on
        one forward of the chosen and rejected rows stacked, logits at temperature 1, with
        ``global_pairs`` = 1 and the result times ``inv_pairs`` (1 / pairs in the whole step),
        exact because the loss is (a sum over pairs) / global_pairs. Returns (fn, keys)."""
        from algorithms.ops import get_ops
        from algorithms.preference import preference_loss

        o, model, pcfg = self.ops, self.model, self.cfg.preference
        npo, z = get_ops("numpy"), np.zeros((1, 2))
        keys = sorted(preference_loss(npo, chosen_logp=z, chosen_mask=z + 1, rejected_logp=z,
                                      rejected_mask=z + 1, ref_chosen_logp=z if has_ref else None,
                                      ref_rejected_logp=z if has_ref else None, cfg=pcfg)[1])

        def loss_fn(c_ids, c_pos, c_att, c_tgt, c_mask, r_ids, r_pos, r_att, r_tgt, r_mask,
                    ref_c, ref_r, inv_pairs):
            B = c_ids.shape[0]
            tgt = ops.concat((c_tgt, r_tgt), 0)
            logits = model.response_logits(ops.concat((c_ids, r_ids), 0),
                                           ops.concat((c_pos, r_pos), 0),
                                           ops.concat((c_att, r_att), 0), tgt.shape[1])
            logp = _token_logp(logits, tgt)
            loss, metrics = preference_loss(
                o, chosen_logp=logp[:B], chosen_mask=c_mask, rejected_logp=logp[B:],
                rejected_mask=r_mask, ref_chosen_logp=ref_c if has_ref else None,
                ref_rejected_logp=ref_r if has_ref else None, cfg=pcfg, global_pairs=1.0)
            aux = ()
            for k in keys:
                aux = aux + (ops.stop_gradient(metrics[k]),)
            return loss * inv_pairs, aux

        return self._fused_step(("pref", has_ref, update), loss_fn, update), keys

    def _step_fn(self, kind: str, flags, update: bool):
        if kind == "sft":
            return self._sft_fn(update)
        if kind == "pref":
            return self._pref_fn(*flags, update=update)
        return self._train_fn(*flags, update=update)

    STEP_NAMES = {"rl": ("train_step", "accumulate_step"),
                  "sft": ("sft_step", "sft_accumulate_step"),
                  "pref": ("preference_step", "preference_accumulate_step")}

    def _run_step_fn(self, kind: str, flags, shape, args, hyper=None):
        """Call the compiled micro-batch step of ``kind`` (with the optimizer update when
        ``hyper`` is given and the update can run in the graph); if rl_loss cannot be compiled
        into the graph, fall back to the split RL step once (logged) -- nothing was accumulated
        or updated by the failed compile. Returns (output vector, metric keys, whether the
        update ran in the graph)."""
        fused_update = hyper is not None and (kind != "rl" or self.train_mode == "fused")
        fn, keys = self._step_fn(kind, flags, fused_update)
        name = self.STEP_NAMES[kind][0 if hyper is not None else 1]
        mode = self.train_mode if kind == "rl" else "fused"
        extra = (hyper,) if fused_update else ()
        try:
            return self._timed(name, (shape,) + tuple(flags) + (mode,), fn,
                               *args, *extra), keys, fused_update
        except (RuntimeError, TypeError, ValueError, KeyError) as err:
            if kind != "rl" or self.train_mode != "fused":
                raise
            reason = str(err).strip().splitlines()[0][:300]
            log.warning("algorithms.rl_loss does not compile into a MindSpore graph (%s); "
                        "falling back to the split step: compiled forward/backward, loss in "
                        "PyNative (slower)", reason)
            self.fallback_reason = reason
            self.train_mode = "split"
            self._seen.pop("train_step", None)
            self._seen.pop("accumulate_step", None)
            ms.runtime.launch_blocking()       # PyNative: ~6x faster (PLATFORM.md)
            fn, keys = self._train_fn(*flags)
            return self._timed(name, (shape,) + tuple(flags) + (self.train_mode,), fn,
                               *args), keys, False

    # --- per-loss inputs: (flags, padded shape, [(step arguments, response tokens)]) --------
    def _rl_inputs(self, micro_batches: List[TrainBatch], norm: LossNormalizers):
        from algorithms.is_correction import needs_rollout_logp

        first = micro_batches[0]
        flags = (first.old_logp is not None, first.ref_logp is not None,
                 first.rollout_logp is not None and needs_rollout_logp(self.cfg.algorithm))
        rows = max(self.cfg.train.micro_batch_size, max(len(m) for m in micro_batches))
        shape = self._shape([m.tokens for m in micro_batches], rows)
        _, P, T = shape
        inv_norm = Tensor(np.float32(1.0 / norm.divisor(self.cfg.algorithm.loss_agg_mode)))
        inputs = []
        for mb in micro_batches:
            tb = repad(mb.tokens, rows, P, T, self.pad_id)
            f = lambda a: Tensor(_pad2(a, rows, T))  # noqa: E731
            args = self._inputs(tb) + (f(mb.advantages), f(mb.old_logp), f(mb.ref_logp),
                                       f(mb.rollout_logp), inv_norm)
            inputs.append((args, float(mb.tokens.response_mask.sum())))
        return flags, shape, inputs

    def _sft_inputs(self, micro_batches: List[TokenBatch], norm: LossNormalizers):
        rows = max(self.cfg.train.micro_batch_size, max(len(m) for m in micro_batches))
        shape = self._shape(micro_batches, rows)
        _, P, T = shape
        inv_norm = Tensor(np.float32(1.0 / norm.divisor("token_mean")))
        inputs = [(self._inputs(repad(tb, rows, P, T, self.pad_id)) + (inv_norm,),
                   float(tb.response_mask.sum())) for tb in micro_batches]
        return (), shape, inputs

    def _pref_inputs(self, micro_pairs, global_pairs: float):
        """``micro_pairs`` = [(chosen, rejected, ref_chosen or None, ref_rejected or None)]:
        chosen and rejected padded to one (prompt, response) bucket pair; rows are NOT padded
        (a padding pair would add a constant to the DPO / IPO / SimPO loss), so a smaller last
        micro-batch compiles its own shape."""
        has_ref = micro_pairs[0][2] is not None
        tbs = [tb for ch, rj, _, _ in micro_pairs for tb in (ch, rj)]
        _, P, T = self._shape(tbs, max(len(tb) for tb in tbs))
        inv_pairs = Tensor(np.float32(1.0 / max(float(global_pairs), 1.0)))
        inputs = []
        for ch, rj, ref_c, ref_r in micro_pairs:
            B = len(ch)
            args = (self._inputs(repad(ch, B, P, T, self.pad_id))
                    + self._inputs(repad(rj, B, P, T, self.pad_id))
                    + (Tensor(_pad2(ref_c, B, T)), Tensor(_pad2(ref_r, B, T)), inv_pairs))
            inputs.append((args, float(ch.response_mask.sum())))
        return (has_ref,), (None, P, T), inputs

    def _accumulate(self, kind: str, flags, shape, inputs, hyper: Optional[Tensor] = None):
        """Forward/backward every micro-batch (``inputs`` from ``_rl_inputs`` / ``_sft_inputs``)
        into the gradient accumulators; with ``hyper`` the last micro-batch's graph also runs
        the optimizer update. Returns the merged metrics (sums, maxes, mins), the
        response-token count of this rank and, when the update ran in the graph,
        (grad_norm, updated)."""
        outputs = []
        fused = None
        for i, (args, n_tok) in enumerate(inputs):
            last = i == len(inputs) - 1
            rows_shape = (int(args[0].shape[0]),) + tuple(shape[1:])
            vec, keys, in_graph = self._run_step_fn(kind, flags, rows_shape, args,
                                                    hyper if last else None)
            outputs.append((vec, n_tok))
        self._loss_acc_clear_if_split()
        merger = MetricMerger()
        names = ["loss"] + list(keys)
        for vec, n_tok in outputs:                   # one host sync per micro-batch
            arr = vec.asnumpy().astype(np.float64)
            if in_graph and vec is outputs[-1][0]:
                fused = (float(arr[-2]), bool(arr[-1] > 0.5))
            merger.add(zip(names, arr.tolist()), n_tok)
        return (*merger.parts(), fused)

    def _loss_acc_clear_if_split(self) -> None:
        # The split step and the accumulate-only graphs leave the loss sum in ``_loss_acc``;
        # only the fused update graph consumes it. Zero it (a host write, no kernel).
        if self.train_mode != "fused" or self.world > 1:
            self._loss_acc.set_data(Tensor(np.zeros(1, np.float32)))

    def _prepare(self, kind: str, micro_batches, norm):
        prepare = {"rl": self._rl_inputs, "sft": self._sft_inputs, "pref": self._pref_inputs}
        return prepare[kind](micro_batches, norm)

    def gradients(self, micro_batches, norm: LossNormalizers, kind: str = "rl"
                  ) -> Dict[str, np.ndarray]:
        """The summed loss gradient of these micro-batches by HF name, without a step (tests
        and debugging; this rank only, no all-reduce): ``kind`` "rl" (TrainBatches, norm),
        "sft" (TokenBatches, norm) or "pref" (pairs as :meth:`preference_step`, global_pairs).
        The accumulators are left zeroed."""
        self._accumulate(kind, *self._prepare(kind, micro_batches, norm))
        self._loss_acc.set_data(Tensor(np.zeros(1, np.float32)))
        out = {p.name: g for p, g in zip(self.params, self.optimizer.grad_arrays())}
        self.optimizer.zero_grad()
        return out

    def train_step(self, micro_batches: List[TrainBatch], norm: LossNormalizers) -> Dict[str, float]:
        """Forward/backward each micro-batch of the RL loss (compiled, bucket-padded),
        all-reduce (SUM) the accumulated gradients across ranks, clip, AdamW, schedule. A
        non-finite loss or grad norm skips the update (``update_skipped`` = 1). Metrics are
        global.

        Fused mode on one rank: the last micro-batch's graph also runs the optimizer step, so a
        one-micro-batch step is a single compiled call and a single host sync."""
        return self._optimizer_step("rl", *self._rl_inputs(micro_batches, norm))

    def sft_step(self, micro_batches: List[TokenBatch], norm: LossNormalizers) -> Dict[str, float]:
        """One optimizer step of masked next-token NLL on the response tokens (token mean over
        ``norm.global_tokens``, logits at temperature 1), compiled once per bucket like
        :meth:`train_step` and sharing its optimizer state, accumulation, all-reduce, clipping,
        schedule and non-finite skip. Metrics as the torch backend's: ``loss`` (the global mean
        NLL), ``nll``, grad_norm, lr, update_skipped, response_tokens."""
        return self._optimizer_step("sft", *self._sft_inputs(micro_batches, norm))

    def preference_step(self, micro_pairs, global_pairs: float) -> Dict[str, float]:
        """One optimizer step of the preference loss (``algorithms.preference_loss``: DPO /
        IPO / SimPO, plus ``pref_ftx`` x SFT), as the torch backend's: ``micro_pairs`` =
        [(chosen TokenBatch, rejected TokenBatch, ref_chosen (B, T) or None, ref_rejected (B, T)
        or None)], ``global_pairs`` = pairs in the whole step (all micro-batches, all ranks).
        Compiled per bucket, same optimizer path as :meth:`train_step`."""
        return self._optimizer_step("pref", *self._pref_inputs(micro_pairs, global_pairs))

    def _optimizer_step(self, kind: str, flags, shape, inputs) -> Dict[str, float]:
        """Accumulate ``inputs``, all-reduce, clip, AdamW at the scheduled lr, count."""
        t = self.cfg.train
        lr = t.lr * lr_factor(self.optimizer_steps, warmup=t.warmup_steps,
                              total=self.total_steps, schedule=t.lr_schedule,
                              min_ratio=t.min_lr_ratio)
        hyper = self.optimizer.hyper(lr, t.grad_clip) if self.world == 1 else None
        sums, maxes, mins, tokens, fused = self._accumulate(kind, flags, shape, inputs, hyper)
        if self.world > 1:
            sums, maxes, mins, tokens = self._reduce_metrics(sums, maxes, mins, tokens)
        out = finish(sums, maxes, mins, tokens)
        if fused is not None:                        # the update already ran in the graph
            grad_norm, finite = fused
            if finite:
                self.optimizer.step += 1
        else:
            grad_norm = self.optimizer.grad_norm()
            finite = math.isfinite(grad_norm) and math.isfinite(out.get("loss", 0.0))
            if finite:
                self.optimizer.apply(lr, t.grad_clip, grad_norm)
            else:
                self.optimizer.zero_grad()
        if finite:
            self.optimizer_steps += 1
        else:
            self.skipped_steps += 1
        out.update(grad_norm=grad_norm, lr=lr, update_skipped=float(not finite),
                   response_tokens=tokens)
        return out

    # ------------------------------------------------------------------ collectives
    def _reduce_metrics(self, sums, maxes, mins, tokens):
        keys_s, keys_x, keys_n = sorted(sums), sorted(maxes), sorted(mins)
        s = self.all_reduce_sum(np.array([sums[k] for k in keys_s] + [tokens]))
        x = -self.all_reduce_sum(np.array([-maxes[k] for k in keys_x]), op="min") \
            if keys_x else np.zeros(0)
        n = self.all_reduce_sum(np.array([mins[k] for k in keys_n]), op="min") \
            if keys_n else np.zeros(0)
        return (dict(zip(keys_s, s[:-1].tolist())), dict(zip(keys_x, x.tolist())),
                dict(zip(keys_n, n.tolist())), float(s[-1]))

    def all_reduce_sum(self, x, op: str = "sum") -> np.ndarray:
        """Element-wise SUM (or MIN) of a NumPy array over ranks (float64 in, float64 out;
        reduced in float32: MindSpore's CPU collectives have no float64, and CPU AllReduce only
        sums, so MIN goes through AllGather)."""
        x = np.asarray(x, dtype=np.float64)
        if self.world == 1 or x.size == 0:
            return x
        if op == "min":
            parts = ops.AllGather()(Tensor(x.astype(np.float32).reshape(1, -1))).asnumpy()
            return parts.min(0).reshape(x.shape).astype(np.float64)
        red = ops.AllReduce(ops.ReduceOp.SUM)
        return red(Tensor(x.astype(np.float32))).asnumpy().astype(np.float64)

    def all_gather(self, x) -> np.ndarray:
        """Concatenate equal-shaped arrays of all ranks along axis 0."""
        x = np.asarray(x)
        if self.world == 1:
            return x
        dtype = x.dtype
        wide = x.astype(np.int32 if dtype.kind in "iub" else np.float32)
        out = ops.AllGather()(Tensor(np.atleast_1d(wide))).asnumpy()
        return out.astype(dtype).reshape((-1,) + x.shape[1:]) if x.ndim else out.astype(dtype)

    def barrier(self) -> None:
        if self.world > 1:
            self.all_reduce_sum(np.zeros(1))

    # ------------------------------------------------------------------ weights and state
    def named_weights(self) -> Iterator[Tuple[str, np.ndarray]]:
        """(HF name, float32 array) per parameter; a tied model also yields ``lm_head.weight``
        (the embedding), as torch's ``state_dict()`` does."""
        for name, arr in W.named_arrays(self.model):
            yield name, arr
            if name == "model.embed_tokens.weight" and self.spec.tie_word_embeddings:
                yield "lm_head.weight", arr

    def save_pretrained(self, directory: str) -> None:
        """HF weights (``model.dtype``), config.json, generation config and tokenizer; rank 0."""
        if self.rank != 0:
            return
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        W.write_checkpoint(str(d), W.named_arrays(self.model), dtype=self.save_dtype)
        cfg = dict(self.hf_config)
        cfg["torch_dtype" if "torch_dtype" in cfg else "dtype"] = self.save_dtype
        (d / "config.json").write_text(json.dumps(cfg, indent=2))
        gen = Path(self.model_path) / "generation_config.json"
        if gen.is_file():
            (d / "generation_config.json").write_text(gen.read_text())
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(str(d))

    def load_pretrained(self, directory: str) -> None:
        """Load policy weights (resume); the reference keeps the original weights."""
        W.load_into(self.model, W.iter_checkpoint(directory))

    load_pretrained_weights = load_pretrained

    def save_state(self, directory: str) -> None:
        """AdamW moments + counters (rank 0; identical on all ranks) and each rank's sampler RNG,
        each file written to a temporary name and renamed."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if self.rank == 0:
            W.write_safetensors(str(d / "ms_optimizer.safetensors"),
                                self.optimizer.state_arrays(), "float32",
                                metadata={"format": "mindrl-mindspore"})
            meta = {"optimizer_steps": self.optimizer_steps, "adam_step": self.optimizer.step,
                    "skipped_steps": self.skipped_steps}
            tmp = d / "ms_state.json.tmp"
            tmp.write_text(json.dumps(meta))
            os.replace(tmp, d / "ms_state.json")
        rng = {"numpy_engine": self._engine.rng_state() if self._engine is not None else None}
        tmp = d / f"ms_rng_rank{self.rank}.json.tmp"
        tmp.write_text(json.dumps(rng))
        os.replace(tmp, d / f"ms_rng_rank{self.rank}.json")

    def load_state(self, directory: str) -> None:
        d = Path(directory)
        if (d / "model.safetensors").is_file() or (d / "model.safetensors.index.json").is_file():
            self.load_pretrained(directory)
        meta = json.loads((d / "ms_state.json").read_text())
        self.optimizer.load_state_arrays(W.read_safetensors(str(d / "ms_optimizer.safetensors")),
                                         meta["adam_step"])
        self.optimizer_steps = meta["optimizer_steps"]
        self.skipped_steps = meta["skipped_steps"]
        rng_file = d / f"ms_rng_rank{self.rank}.json"
        if rng_file.is_file() and self._engine is not None:
            state = json.loads(rng_file.read_text()).get("numpy_engine")
            if state is not None:
                self._engine.set_rng_state(state)

    # ------------------------------------------------------------------ rollout
    def native_engine(self):
        """A :class:`mindrl.backends.mindspore.sampler.MindSporeSampler` sharing this policy's
        parameters (no weight copy; ``load_weights`` writes into them)."""
        if self._engine is None:
            from mindrl.backends.mindspore.sampler import MindSporeSampler

            stop = ()
            if self.tokenizer is not None and self.tokenizer.eos_token_id is not None:
                stop = (self.tokenizer.eos_token_id,)
            self._engine = MindSporeSampler(self.model, tokenizer=self.tokenizer,
                                            pad_id=self.pad_id, eos_ids=stop,
                                            prompt_buckets=self.prompt_buckets,
                                            response_buckets=self.response_buckets)
        return self._engine
