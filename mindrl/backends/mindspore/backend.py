"""The MindSpore training backend: the decoder Cell of ``model.py``, compiled (``mindspore.jit``)
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
ranks is the full-batch gradient (the same convention as the torch backend). With
``train.shard_optimizer`` each rank keeps only its slice of the AdamW state and the ranks gather
the updated weights (``sharded_optim.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from algorithms.truncation import Truncation
from mindrl.backends.base import BACKENDS
from mindrl.backends.schedule import lr_factor, total_optimizer_steps  # noqa: F401  (re-exported)
from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.buckets import default_buckets, pad2 as _pad2, repad  # noqa: F401
from mindrl.backends.mindspore.checkpoint_io import CheckpointIOMixin
from mindrl.backends.mindspore.chunked_head import ChunkedHeadMixin
from mindrl.backends.mindspore.compiled import CompiledStepMixin
from mindrl.backends.mindspore.compiled import step_vector as _vector  # noqa: F401
from mindrl.backends.mindspore.compiled import token_logp as _token_logp
from mindrl.backends.mindspore.model import Qwen2ForCausalLM, Qwen2Spec, recompute_layers
from mindrl.backends.mindspore.truncation import truncated_logits_and_logp
from mindrl.backends.mindspore.optim import AdamW
from mindrl.backends.mindspore.preference_step import PreferenceStepMixin
from mindrl.backends.mindspore.rl_step import RLStepMixin
from mindrl.backends.mindspore.sft_step import SFTStepMixin
from mindrl.types import TokenBatch, bucket

log = logging.getLogger(__name__)

DEVICE_TARGETS = {"cpu": "CPU", "ascend": "Ascend", "cuda": "GPU"}


# ------------------------------------------------------------------------------ helpers
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
    if on_cpu:          # NumPy's BLAS too: the head in host memory (host_head) runs on it
        from mindrl.backends.mindspore.host_head import limit_host_blas

        limit_host_blas(n)
    try:
        ms.set_context(runtime_num_threads=n)
    except (RuntimeError, ValueError, TypeError) as err:   # already started: keep the default
        log.info("could not set MindSpore runtime_num_threads=%d: %s", n, err)


def _in_msrun() -> bool:
    return "MS_WORKER_NUM" in os.environ or "MS_ROLE" in os.environ


# ------------------------------------------------------------------------------ the backend
@BACKENDS.register("mindspore")
class MindSporeBackend(RLStepMixin, SFTStepMixin, PreferenceStepMixin, CompiledStepMixin,
                       ChunkedHeadMixin, CheckpointIOMixin):
    """Policy (+ optional frozen reference) as :class:`Qwen2ForCausalLM` Cells.

    This file is the glue (set-up, scoring, collectives, the sampler); the steps live in files
    named for them: ``rl_step.py`` (``train_step``), ``sft_step.py``, ``preference_step.py``,
    their shared compile / accumulate / optimizer path in ``compiled.py``, padding to buckets in
    ``buckets.py`` and weights and state in ``checkpoint_io.py``.

    ``cfg`` is a :class:`mindrl.config.schema.RunConfig`. ``prompt_buckets`` /
    ``response_buckets`` default to powers of two up to ``data.max_prompt_len`` /
    ``rollout.max_new_tokens``; longer SFT / preference responses add doubling buckets.
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
        if cfg.model.moe.routing_replay != "none" and not self.spec.moe_layer_ids:
            from mindrl.errors import UserError

            raise UserError(f"model.moe.routing_replay={cfg.model.moe.routing_replay}: "
                            f"model.path {cfg.model.path} (model_type "
                            f"'{self.spec.model_type}') has no top-k expert routers to "
                            "replay; set model.moe.routing_replay=none")
        self.save_dtype = cfg.model.dtype
        on_cpu = ms.get_context("device_target") == "CPU"
        if on_cpu and cfg.model.dtype != "float32":
            log.warning("model.dtype=%s: MindSpore has no CPU kernels for bf16/fp16 MatMul; "
                        "computing in float32 (checkpoints are still written as %s)",
                        cfg.model.dtype, cfg.model.dtype)
        self.dtype = ms.float32 if on_cpu else {"float32": ms.float32, "bfloat16": ms.bfloat16,
                                                "float16": ms.float16}[cfg.model.dtype]
        self.model = self._load_model(self.model_path)
        self.lora = cfg.model.lora if cfg.model.lora.enabled else None
        if self.lora:                          # LoRA cells; reference = adapters off
            from mindrl.backends.mindspore.lora import add_adapters

            add_adapters(self.model, self.lora, self.hf_config, cfg.train.seed)
        if cfg.model.gradient_checkpointing:    # after the adapters: it marks existing cells
            recompute_layers(self.model)
        self.reference = None
        if with_reference and not self.lora:
            self.reference = self._load_model(self.model_path)
            for p in self.reference.get_parameters():
                p.requires_grad = False
        self.teacher = None                # algorithm.distill.teacher: scores the rollouts
        teacher = getattr(getattr(cfg.algorithm, "distill", None), "teacher", "")
        if teacher:
            tdir = resolve_model_path(teacher)
            self.teacher = Qwen2ForCausalLM(Qwen2Spec.from_hf(W.read_config(tdir)),
                                            dtype=self.dtype)
            W.load_into(self.teacher, W.iter_checkpoint(tdir))
            for p in self.teacher.get_parameters():
                p.requires_grad = False
                p.name = "teacher." + p.name   # unique beside the student's in one graph
        self.tokenizer = self._load_tokenizer(self.model_path, cfg.model.trust_remote_code)
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
        # bf16/fp16 parameters: float32 masters in the optimizer; saved with its state whenever
        # the model directory is written in a lower precision (exact resume)
        if t.shard_optimizer and self.world > 1:
            # moments and masters sliced over the ranks (ZeRO-1), see sharded_optim.py
            from mindrl.backends.mindspore.sharded_optim import ShardedAdamW

            self.optimizer = ShardedAdamW(self.params, rank=self.rank, world=self.world,
                                          betas=tuple(t.betas), eps=t.adam_eps,
                                          weight_decay=t.weight_decay,
                                          reduce_scatter=not on_cpu,
                                          save_masters=cfg.model.dtype != "float32")
        else:
            self.optimizer = AdamW(self.params, betas=tuple(t.betas), eps=t.adam_eps,
                                   weight_decay=t.weight_decay, all_reduce=reducer,
                                   save_masters=cfg.model.dtype != "float32")
        if self.optimizer.master is not None:     # the masters at the files' own precision
            for _ in self.optimizer.set_masters(W.iter_checkpoint(self.model_path)):
                pass
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
        # the rollout's top-k / min-p / top-p: the policy scores rollouts under the same masks
        self.truncation = Truncation.from_rollout(cfg.rollout)
        self._routes_fn = None            # model.moe.routing_replay=old: the policy's routes
        self._router_fn = None            # model.moe.aux_loss_coef: the pre-pass (rl_step)
        self._aux_value = None
        self._logp_fns = {False: ms.jit(self._make_logp_fn(self.model)),
                          "truncated": ms.jit(self._make_logp_fn(self.model, self.truncation)),
                          True: ms.jit(self._make_logp_fn(self.reference))
                          if self.reference is not None else None,
                          "teacher": ms.jit(self._make_logp_fn(self.teacher))
                          if self.teacher is not None else None}
        if self.lora:                          # one graph: the adapters' `on` is an input
            self._logp_fns[True] = self._logp_fns[False]
        self._engine = None
        from mindrl.backends.mindspore.critic import build_critic

        self.critic = build_critic(self)          # PPO value model (adv_estimator: gae) or None

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
    def _load_tokenizer(directory: str, trust_remote_code: bool = False):
        names = ("tokenizer.json", "tokenizer_config.json", "vocab.json")
        if not any((Path(directory) / n).is_file() for n in names):
            return None
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(directory, local_files_only=True,
                                             trust_remote_code=trust_remote_code)

    # ------------------------------------------------------------------ shapes
    def budget_lengths(self, batch: TokenBatch) -> np.ndarray:
        """(B,) each row's length as a compiled step pads it (the prompt bucket plus the
        bucket of its own response): what ``train.max_tokens_per_micro_batch`` counts here."""
        P = bucket(batch.prompt_len, self.prompt_buckets)
        own = batch.response_mask.sum(axis=1).astype(np.int64)
        return np.array([P + bucket(max(int(n), 1), self.response_buckets) for n in own],
                        dtype=np.int64)

    def _shape(self, batches: Sequence[TokenBatch], rows: int) -> Tuple[int, int, int]:
        P = max(b.prompt_len for b in batches)
        T = max(b.response_len for b in batches)
        if T > self.response_buckets[-1]:   # SFT / preference responses (data.max_response_len)
            top = 1 << (T - 1).bit_length()  # outgrow rollout.max_new_tokens: doubling buckets
            self.response_buckets = sorted(set(self.response_buckets) | set(
                default_buckets(top, self.response_buckets[-1])))
        return rows, bucket(P, self.prompt_buckets), bucket(T, self.response_buckets)

    # ------------------------------------------------------------------ scoring
    def _make_logp_fn(self, model, trunc=None):
        if model is None:
            return None

        def logp_fn(ids, pos, att, targets, mask, inv_temp):
            T = targets.shape[1]
            logits = model.response_logits(ids, pos, att, T) * inv_temp
            if trunc is not None:
                return truncated_logits_and_logp(logits, targets, trunc)[1] * mask
            return _token_logp(logits, targets) * mask
        return logp_fn

    def logprobs(self, batch: TokenBatch, *, temperature: float, reference: bool = False,
                 micro_batch_size: int = 8, teacher: bool = False,
                 truncated: bool = False) -> np.ndarray:
        """(B, T) float32 log-probs of the response tokens under logits / temperature
        (temperature 0 = 1); 0 at padding. Scored in micro-batches padded to buckets.
        ``reference`` / ``teacher``: of the reference / distillation teacher model.
        ``truncated``: the policy's under the rollout's top-k / min-p / top-p
        (``self.truncation``, :mod:`algorithms.truncation`)."""
        truncated = truncated and not (reference or teacher) and self.truncation is not None
        if (reference or teacher) and batch.routing is not None:
            batch = dataclasses.replace(batch, routing=None)   # frozen models route natively
        fn = self._logp_fns["teacher" if teacher else "truncated" if truncated
                            else bool(reference)]
        if fn is None and teacher:
            raise RuntimeError("teacher log-probs need algorithm.distill.teacher")
        if fn is None:
            raise RuntimeError("reference log-probs need MindSporeBackend(cfg, "
                               "with_reference=True) (algorithm.kl.coef > 0)")
        inv_temp = Tensor(np.float32(1.0 / (temperature if temperature > 0 else 1.0)))
        rows = max(1, min(micro_batch_size, len(batch)))
        _, P, T = self._shape([batch], rows)
        which = "teacher" if teacher else "reference" if reference and not self.lora else \
            "policy"
        model = {"teacher": self.teacher, "reference": self.reference}.get(which, self.model)
        chunk = self._head_chunk(rows * T, model)
        if chunk:           # train.logprob_chunk_tokens: the head a chunk of tokens at a time
            trunc = self.truncation if truncated else None
            fn = lambda *a: self._chunked_logprobs(which, model, trunc, a[:5], a[5],  # noqa
                                                   chunk)
        out = []
        for s in range(0, len(batch), rows):
            mb = batch.rows(slice(s, s + rows))
            tb = repad(mb, rows, P, T, self.pad_id)
            name = "teacher_logprobs" if teacher else "ref_logprobs" if reference else \
                "truncated_logprobs" if truncated else "logprobs"
            if self.lora and reference and not teacher:
                from mindrl.backends.mindspore.lora import adapters_off

                with adapters_off(self.model):
                    lp = self._timed(name, (rows, P, T), fn, *self._inputs(tb),
                                     inv_temp).asnumpy()
            else:
                lp = self._timed(name, (rows, P, T), fn, *self._inputs(tb), inv_temp).asnumpy()
            out.append(lp[:len(mb), :batch.response_len])
        return np.concatenate(out).astype(np.float32)

    def record_routes(self, batch: TokenBatch, micro_batch_size: int = 8) -> np.ndarray:
        """The policy's own expert choices for ``batch``: (B, P+T, num_hidden_layers, k)
        int16, -1 at padding and dense layers (``model.moe.routing_replay=old``)."""
        import mindspore as ms

        spec = self.spec
        layers, k = spec.moe_layer_ids, spec.num_experts_per_tok
        if self._routes_fn is None:
            model = self.model

            def route_indices(ids, pos, att):
                return model.route_indices(ids, pos, att)

            self._routes_fn = ms.jit(route_indices)
        rows = max(1, min(micro_batch_size, len(batch)))
        _, P, T = self._shape([batch], rows)
        out = np.full(batch.input_ids.shape + (spec.num_hidden_layers, k), -1, np.int16)
        lo = P - batch.prompt_len
        width = batch.input_ids.shape[1]
        for s in range(0, len(batch), rows):
            mb = batch.rows(slice(s, s + rows))
            tb = repad(dataclasses.replace(mb, routing=None), rows, P, T, self.pad_id)
            ids, pos, att = self._inputs(tb)[:3]
            idx = self._timed("route_indices", (rows, P, T), self._routes_fn, ids, pos,
                              att).asnumpy().reshape(len(layers), rows, P + T, k)
            for j, layer in enumerate(layers):
                out[s:s + len(mb), :, layer] = idx[j, :len(mb), lo:lo + width]
        out[batch.attention_mask == 0] = -1
        return out

    def route_flip_fraction(self):
        """Not measured on this backend (the compiled steps do not report it)."""
        return None

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


def rollout_sampler(cfg, model_path: str):
    """A :class:`mindrl.backends.mindspore.sampler.MindSporeSampler` over its own copy of the
    policy in ``model_path`` (no optimizer, reference or compiled training step), set up as
    :meth:`MindSporeBackend.native_engine` sets up the trainer's: the engine of a rollout worker
    process (``rollout.mode=async_ray``). Its weights change through the sampler's
    ``load_weights`` ((HF name, array) pairs, as :meth:`named_weights` yields them)."""
    from mindrl.backends.mindspore.sampler import MindSporeSampler

    target = DEVICE_TARGETS.get(cfg.device, "CPU")
    _configure_threads(max(1, int(getattr(cfg.train, "threads", 1) or 1)),
                       on_cpu=target == "CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target=target)
    dtype = ms.float32 if target == "CPU" else {"float32": ms.float32, "bfloat16": ms.bfloat16,
                                                "float16": ms.float16}[cfg.model.dtype]
    model = Qwen2ForCausalLM(Qwen2Spec.from_hf(W.read_config(model_path)), dtype=dtype)
    W.load_into(model, W.iter_checkpoint(model_path))
    for p in model.get_parameters():
        p.requires_grad = False
    tokenizer = MindSporeBackend._load_tokenizer(model_path, cfg.model.trust_remote_code)
    pad_id, stop = 0, ()
    if tokenizer is not None:
        pid = tokenizer.pad_token_id
        pad_id = pid if pid is not None else (tokenizer.eos_token_id or 0)
        if tokenizer.eos_token_id is not None:
            stop = (tokenizer.eos_token_id,)
    prompt_buckets = default_buckets(cfg.data.max_prompt_len)
    if cfg.rollout.partial_rollouts:    # a resumed generation's prompt holds its tokens so far
        longest = cfg.data.max_prompt_len + cfg.rollout.max_new_tokens
        prompt_buckets += [b for b in default_buckets(longest) if b > prompt_buckets[-1]]
    return MindSporeSampler(model, tokenizer=tokenizer, pad_id=pad_id, eos_ids=stop,
                            prompt_buckets=prompt_buckets,
                            response_buckets=default_buckets(cfg.rollout.max_new_tokens),
                            seed=cfg.rollout.seed)
