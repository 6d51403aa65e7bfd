"""The PyTorch training backend: a transformers causal LM, AdamW, and data parallelism over
``torch.distributed`` (torchrun; gloo on CPU, nccl on GPU).

Data parallelism is a manual all-reduce (SUM) of the flattened gradients once per optimizer
step, not DDP: the RL loss is already normalised by *global* counts
(:class:`mindrl.types.LossNormalizers`), so each rank's gradient is its share of the full-batch
gradient and the sum over ranks is the full-batch gradient. One collective per step also keeps
gradient accumulation free of ``no_sync`` bookkeeping.

With ``train.fsdp`` (and more than one rank) the policy (and reference) are sharded instead
(FSDP2 ``fully_shard`` per decoder layer, then the root): parameters, gradients and AdamW state
live 1/world per rank; FSDP averages the reduce-scattered gradients, so the backward runs on
``world x loss`` and the result is the same SUM (gloo has no pre-multiplied sum); and full weights are gathered only for the rollout engine and checkpoints
(:meth:`TorchBackend.stage_checkpoint`, called on every rank before rank 0 writes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from algorithms.truncation import Truncation
from mindrl.backends.base import BACKENDS
from mindrl.backends.metrics import Clock, MetricMerger, finish
from mindrl.backends.torch.optim import make_optimizer
from mindrl.models.tiny import check_model_dir, resolve_model_path
from mindrl.torch_device import DTYPES, torch_device as _device  # noqa: F401  (DTYPES re-exported)
from mindrl.types import LossNormalizers, TokenBatch, TrainBatch

def _init_distributed(device: torch.device) -> Tuple[int, int]:
    """Join the torchrun process group if WORLD_SIZE > 1; returns (rank, world)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and dist.is_available() and not dist.is_initialized():
        backend = {"cuda": "nccl", "npu": "hccl"}.get(device.type, "gloo")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


FSDP_MASTERS = "torch_masters_full.pt"   # train.fsdp in bf16/fp16: the float32 parameters


def _set_config_dtype(directory: Path, dtype: str) -> None:
    """config.json's ``dtype`` = model.dtype, the dtype the weights were saved in (transformers
    writes the first parameter's dtype: float32 for FSDP's float32 shards)."""
    import json

    f = directory / "config.json"
    if f.is_file():
        conf = json.loads(f.read_text())
        if conf.get("dtype", dtype) != dtype:
            conf["dtype"] = dtype
            f.write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")


def load_state_file(path: Path, map_location) -> Dict:
    """A state file written by :meth:`TorchBackend.save_state`: tensors, numbers, strings and
    containers only, so it is read with ``weights_only=True`` and anything else planted in the
    run directory (a pickle that runs code) is refused, naming the file."""
    from mindrl.errors import UserError

    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise UserError(f"{path} is missing: the checkpoint is incomplete") from None
    except Exception as e:  # UnpicklingError, or the file is not a torch zip at all
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: refused to load: it holds more than tensors and plain values "
                        f"(a file planted or damaged in the run directory?): {first}") from None


@BACKENDS.register("torch")
class TorchBackend:
    """Policy (+ optional frozen reference) as transformers models, trained with AdamW.

    ``cfg`` is a :class:`mindrl.config.schema.RunConfig`. Rank and world size come from the
    torchrun environment (RANK / WORLD_SIZE / LOCAL_RANK).
    """

    name = "torch"
    # each micro-batch is padded only to its own longest row (packing.trim_train), so the
    # trainer cuts micro-batches from rows sorted by length (mindrl.backends.batching)
    trims_micro_batches = True

    def __init__(self, cfg, with_reference: bool = False):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.cfg = cfg
        # the rollout's top-k / min-p / top-p: the policy scores rollouts under the same masks
        self.truncation = Truncation.from_rollout(cfg.rollout)
        torch.set_num_threads(max(1, cfg.train.threads))
        self.device = _device(cfg)
        self.rank, self.world = _init_distributed(self.device)
        self.model_path = resolve_model_path(cfg.model.path)
        check_model_dir(self.model_path)
        torch.manual_seed(cfg.train.seed)
        self.dtype = DTYPES[cfg.model.dtype]       # compute and saved dtype (model.dtype)
        load = dict(local_files_only=True, dtype=self.dtype,
                    trust_remote_code=cfg.model.trust_remote_code)
        self.tokenizer = AutoTokenizer.from_pretrained(
            self.model_path, local_files_only=True, trust_remote_code=cfg.model.trust_remote_code)
        self.fsdp = bool(getattr(cfg.train, "fsdp", False)) and self.world > 1
        # the policy is read in float32: its trainable parameters become the optimizer's float32
        # masters, the model a model.dtype copy of them (optim.MasterWeights; FSDP2 keeps float32
        # shards and casts them to model.dtype for compute)
        self.model = AutoModelForCausalLM.from_pretrained(self.model_path,
                                                          **{**load, "dtype": torch.float32})
        if not self.fsdp:                  # FSDP moves only each rank's shards to the device
            self.model = self.model.to(self.device)
        if cfg.model.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
        self.model.config.use_cache = False
        self.lora = cfg.model.lora if cfg.model.lora.enabled else None
        if self.lora:                      # peft: base frozen; reference = adapters off
            from mindrl.backends.torch.lora import add_adapters

            self.model = add_adapters(self.model, self.lora, cfg.train.seed)
        self.model.train()
        self._aux_loss = None              # model.moe.aux_loss_coef: the last training forward's
        self._aux_weights = None           # part of the mini-batch's aux; (E,) E f / R and the
        self._aux_value = None             # aux value, from the pre-pass (moe_balance)
        self.routes = None                 # model.moe.routing_replay: the policy's routers
        if cfg.model.moe.routing_replay != "none":
            from mindrl.backends.torch.moe_replay import RouterHooks
            from mindrl.errors import UserError

            self.routes = RouterHooks.of(self.model)
            if not self.routes.is_moe:
                raise UserError(
                    f"model.moe.routing_replay={cfg.model.moe.routing_replay}: model.path "
                    f"{cfg.model.path} (model_type "
                    f"'{getattr(self.model.config, 'model_type', '?')}') has no top-k expert "
                    "routers to replay; set model.moe.routing_replay=none")
        self.reference = None
        if with_reference and not self.lora:
            self.reference = AutoModelForCausalLM.from_pretrained(self.model_path, **load)
            if not self.fsdp:
                self.reference.to(self.device)
            self.reference.eval().requires_grad_(False)
        self.teacher = None                # algorithm.distill.teacher: scores the rollouts
        teacher = getattr(getattr(cfg.algorithm, "distill", None), "teacher", "")
        if teacher:
            self.teacher = AutoModelForCausalLM.from_pretrained(resolve_model_path(teacher),
                                                                **load)
            if not self.fsdp:
                self.teacher.to(self.device)
            self.teacher.eval().requires_grad_(False)
        self._staged = None
        if self.fsdp:                      # every rank loaded the same files: shard in place
            self._shard(self.model, compute=self.dtype)
            for frozen in (self.reference, self.teacher):
                if frozen is not None:
                    self._shard(frozen)
        elif self.world > 1:               # identical start on every rank
            import torch.distributed as dist

            for p in self.model.parameters():
                dist.broadcast(p.data, src=0)

        from algorithms.ops import get_ops

        self.ops = get_ops("torch")
        # float32 masters (FSDP: the float32 shards themselves) + AdamW over them
        self.masters, self.optimizer, self.scheduler = make_optimizer(
            self.model, torch.float32 if self.fsdp else self.dtype, cfg, cfg.train.lr,
            cfg.train.weight_decay)
        self.params = self.masters.model_params           # what backward writes gradients to
        if not self.fsdp:
            from mindrl.backends.torch.chunked_head import sparse_tied_embedding

            sparse_tied_embedding(self.model)
        self.optimizer_steps = 0
        self.skipped_steps = 0
        from mindrl.backends.torch.critic import build_critic

        self.critic = build_critic(self)          # PPO value model (adv_estimator: gae) or None
        self.phase_times = {"train_fwd_bwd": 0.0, "optimizer": 0.0}   # logging.profile

    def _shard(self, model, compute=None) -> None:
        """FSDP2: each decoder layer its own unit, then the root (embeddings, norm, head), on a
        1-D mesh of this backend's device type (the shards move to the device). ``compute``
        (the policy, float32 shards): gathered parameters in that dtype, gradients reduced in
        float32."""
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        layers = getattr(getattr(model, "model", None), "layers", None)
        if layers is None:
            raise ValueError(f"train.fsdp: {type(model).__name__} has no .model.layers to shard")
        mesh = init_device_mesh(self.device.type, (self.world,))
        kw = {}
        if compute is not None and compute != torch.float32:
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32)
        for layer in layers:
            fully_shard(layer, mesh=mesh, **kw)
        fully_shard(model, mesh=mesh, **kw)

    # ---------------------------------------------------------------- scoring
    def _tensors(self, batch: TokenBatch):
        dev = self.device
        return (torch.from_numpy(np.ascontiguousarray(batch.input_ids)).to(dev),
                torch.from_numpy(np.ascontiguousarray(batch.attention_mask)).to(dev),
                torch.from_numpy(batch.position_ids).to(dev))

    def _response_logits(self, model, batch: TokenBatch, temperature: float,
                         hidden: Optional[torch.nn.Linear] = None) -> torch.Tensor:
        """(B, T, V) float32 logits / temperature that predict the T response tokens.
        ``hidden``: the model's head; then the (B, T, H) final hidden states at those positions
        instead, the head bypassed (:mod:`mindrl.backends.torch.chunked_head` applies it)."""
        import contextlib

        from mindrl.backends.torch.chunked_head import head_bypassed

        ids, att, pos = self._tensors(batch)
        T = batch.response_len
        replay = contextlib.nullcontext()
        if batch.routing is not None and self.routes is not None and model is self.model:
            replay = self.routes.replaying(batch.routing, self.device)
        extra = self._moe_forward_kwargs(model)
        # Right-padded responses: the logits of positions P-1 .. P+T-2 are the last T+1 minus
        # the final one, so the LM head runs on T+1 positions only.
        bypass = head_bypassed(hidden) if hidden is not None else contextlib.nullcontext()
        with replay, bypass:
            out = model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=False,
                        logits_to_keep=T + 1, **extra)
        if extra:
            self._keep_balance_term(out, att)
        if hidden is not None:
            return out.logits[:, :-1, :]
        logits = out.logits[:, :-1, :].float()
        return logits / (temperature if temperature > 0 else 1.0)

    # ------------------------------------------------------- MoE load balancing
    def _moe_forward_kwargs(self, model) -> dict:
        """Extra forward arguments of a training forward of the policy that adds the MoE
        load-balancing loss (``model.moe.aux_loss_coef``): the routers' logits."""
        aux = bool(self.cfg.model.moe.aux_loss_coef) and model is self.model and \
            torch.is_grad_enabled() and self._aux_weights is not None
        return {"output_router_logits": True} if aux else {}

    def _router_logits(self, out):
        logits = getattr(out, "router_logits", None)
        if not logits:
            from mindrl.errors import UserError

            raise UserError(f"model.moe.aux_loss_coef: model.path {self.cfg.model.path} "
                            "returns no router logits (not a mixture-of-experts model); set "
                            "model.moe.aux_loss_coef=0")
        return logits

    def _keep_balance_term(self, out, mask) -> None:
        """After a training forward: this micro-batch's part of the mini-batch's aux
        (:func:`mindrl.backends.torch.moe_balance.balance_term`; ``mask`` None = packed)."""
        from mindrl.backends.torch.moe_balance import balance_term

        self._aux_loss = balance_term(self._router_logits(out), mask, self._aux_weights)

    @torch.no_grad()
    def _moe_balance(self, batches: List[TokenBatch]) -> None:
        """The pre-pass of ``model.moe.aux_loss_coef``: the expert shares f and the row count
        R of the whole mini-batch (all ``batches``, all ranks), from no-grad forwards of the
        policy (routes replayed as in training), into ``_aux_weights`` (E f / R) and
        ``_aux_value`` (E sum f P) (:mod:`mindrl.backends.torch.moe_balance`)."""
        import contextlib

        from mindrl.backends.torch import packing
        from mindrl.backends.torch.moe_balance import router_sums

        conf = self.model.config
        k = int(getattr(conf, "num_experts_per_tok", 0) or 0)
        sums = None
        for tb in batches:
            tb = packing.trim_tokens(tb)
            if self.cfg.train.padding_free:
                pk = packing.pack(tb, self.device)
                if pk.keep.numel() == 0:      # no response token: its training forward is
                    continue                  # skipped (packing.logp_and_entropy)
                with packing.forward_inputs(self.model, pk) as inputs:
                    out = self.model(**inputs, use_cache=False, logits_to_keep=1,
                                     output_router_logits=True)
                mask = None
            else:
                ids, mask, pos = self._tensors(tb)
                replay = contextlib.nullcontext()
                if tb.routing is not None and self.routes is not None:
                    replay = self.routes.replaying(tb.routing, self.device)
                with replay:
                    out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos,
                                     use_cache=False, logits_to_keep=1,
                                     output_router_logits=True)
            part = torch.cat([x.reshape(-1) for x in router_sums(self._router_logits(out),
                                                                 mask, k)])
            sums = part if sums is None else sums + part
        if sums is None:
            E = int(getattr(conf, "num_experts", 0) or getattr(conf, "num_local_experts", 1))
            sums = torch.zeros(2 * E + 1, dtype=torch.float64, device=self.device)
        if self.world > 1:
            import torch.distributed as dist

            sums = sums.float()               # every collective backend has float32 SUM
            dist.all_reduce(sums)
            sums = sums.double()
        E = (sums.numel() - 1) // 2
        rows = sums[-1].clamp(min=1.0)
        f, P = sums[:E] / rows, sums[E:2 * E] / rows
        self._aux_weights = (E * f / rows).float()
        self._aux_value = float(E * (f * P).sum())

    def _token_logp(self, logits: torch.Tensor, batch: TokenBatch) -> torch.Tensor:
        targets = torch.from_numpy(batch.input_ids[:, batch.prompt_len:]).to(self.device)
        return torch.gather(F.log_softmax(logits, dim=-1), -1, targets.unsqueeze(-1)).squeeze(-1)

    @torch.no_grad()
    def logprobs_and_entropy(self, batch: TokenBatch, *, temperature: float,
                             reference: bool = False, micro_batch_size: int = 8,
                             with_entropy: bool = True, teacher: bool = False,
                             truncated: bool = False
                             ) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """(B, T) float32 log-probs (and token entropies) of the response tokens under
        logits / temperature; 0 at padding. ``reference`` / ``teacher``: of the frozen
        reference / distillation teacher instead of the policy. ``truncated``: the policy's
        under the rollout's top-k / min-p / top-p (``self.truncation``; the sampling
        distribution, :mod:`algorithms.truncation`)."""
        import contextlib

        model = (self.teacher if teacher
                 else self.reference if reference and not self.lora else self.model)
        if model is None:
            raise RuntimeError("teacher log-probs need algorithm.distill.teacher" if teacher else
                               "reference log-probs need TorchBackend(cfg, with_reference=True) "
                               "(algorithm.kl.coef > 0)")
        from mindrl.backends.torch import packing

        if (reference or teacher) and batch.routing is not None:
            batch = dataclasses.replace(batch, routing=None)   # frozen models route natively
        from mindrl.backends.batching import micro_batch_rows

        logps, ents = [], []
        T = batch.response_len
        # padded: rows of similar length share a micro-batch (each trimmed to its own longest
        # row); every row's log-probs go back to its own place
        cuts = micro_batch_rows(batch.attention_mask.sum(axis=1), count=micro_batch_size,
                                by_length=not self.cfg.train.padding_free)
        for idx in cuts:
            mb = packing.trim_tokens(batch.rows(idx))
            scope = contextlib.nullcontext()
            if self.lora and model is self.model:   # adapters off for the reference, no dropout
                from mindrl.backends.torch.lora import scoring

                scope = scoring(model, reference)
            with scope:
                logp, ent = packing.score(self, model, mb, temperature,
                                          "no_grad" if with_entropy else None,
                                          truncated and model is self.model and not reference)
            mask = torch.from_numpy(mb.response_mask).to(self.device)
            logps.append(packing.pad_columns((logp * mask).cpu().numpy(), T))
            if with_entropy:
                ents.append(packing.pad_columns((ent * mask).cpu().numpy(), T))
        where = np.argsort(np.concatenate(cuts), kind="stable")   # back to the batch's order
        logp = np.concatenate(logps)[where].astype(np.float32)
        return logp, (np.concatenate(ents)[where].astype(np.float32) if with_entropy else None)

    def logprobs(self, batch: TokenBatch, *, temperature: float, reference: bool = False,
                 micro_batch_size: int = 8, teacher: bool = False,
                 truncated: bool = False) -> np.ndarray:
        return self.logprobs_and_entropy(batch, temperature=temperature, reference=reference,
                                         micro_batch_size=micro_batch_size,
                                         with_entropy=False, teacher=teacher,
                                         truncated=truncated)[0]

    @torch.no_grad()
    def record_routes(self, batch: TokenBatch, micro_batch_size: int = 8) -> np.ndarray:
        """The policy's own expert choices for ``batch``: (B, P+T, num_hidden_layers, k) int16
        (``model.moe.routing_replay=old``: recorded before the update, replayed in it)."""
        ids, att, pos = self._tensors(batch)
        parts = []
        with self.routes.recording():
            for s in range(0, len(batch), micro_batch_size):
                sl = slice(s, s + micro_batch_size)
                self.model(input_ids=ids[sl], attention_mask=att[sl], position_ids=pos[sl],
                           use_cache=False, logits_to_keep=1)
                parts.append(self.routes.pop(ids[sl].shape[0], ids.shape[1]))
        out = np.concatenate(parts)
        out[batch.attention_mask == 0] = -1
        return out

    def route_flip_fraction(self) -> Optional[float]:
        """Share of the replayed (token, MoE layer) routes whose native top-k differed, since
        the last call; None without replay."""
        return None if self.routes is None else self.routes.take_flip_fraction()

    # ---------------------------------------------------------------- training
    def _const(self, a):
        if a is None:
            return None
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(self.device)

    def _micro_loss(self, mb: TrainBatch, norm: LossNormalizers):
        """Scalar RL loss (this micro-batch's share of the global loss) and its metrics."""
        from algorithms.is_correction import needs_rollout_logp
        from algorithms.rl_loss import rl_loss

        from mindrl.backends.torch import packing

        acfg = self.cfg.algorithm
        coef = self.cfg.model.moe.aux_loss_coef
        lone = bool(coef) and self._aux_weights is None
        if lone:            # called outside train_step: this micro-batch is the mini-batch
            self._moe_balance([mb.tokens])
        mb = packing.trim_train(mb)         # columns that are padding in every row go
        # (B, T) log-probs; the entropy is a metric only (no graph) unless it is in the loss
        # (a fixed coefficient, or adaptive entropy control: norm.entropy_coef)
        ent_mode = "grad" if acfg.entropy_coef or norm.entropy_coef is not None else "no_grad"
        teacher_kl = None                   # distill.estimator=full: exact KL to the teacher
        if self.teacher is not None and acfg.distill.estimator == "full":
            logp, entropy, teacher_kl = packing.score_full_kl(
                self, mb.tokens, self.cfg.rollout.temperature, ent_mode)
        else:
            logp, entropy = packing.score(self, self.model, mb.tokens,
                                          self.cfg.rollout.temperature, ent_mode, truncated=True)
        mask = self._const(mb.tokens.response_mask)
        rollout_logp = self._const(mb.rollout_logp)
        # old_logp None = strictly on-policy: the ratio is 1 in value, exp(logp - sg(logp))
        old_logp = logp.detach() if mb.old_logp is None else self._const(mb.old_logp)
        loss, metrics = rl_loss(
            self.ops, logp=logp, old_logp=old_logp, advantages=self._const(mb.advantages),
            response_mask=mask, ref_logp=self._const(mb.ref_logp),
            rollout_logp=rollout_logp if needs_rollout_logp(acfg) else None, entropy=entropy,
            cfg=acfg, global_tokens=norm.global_tokens, global_seqs=norm.global_seqs, max_len=norm.max_len,
            teacher_logp=self._const(getattr(mb, "teacher_logp", None)),
            entropy_coef=norm.entropy_coef, teacher_kl=teacher_kl,
            cov_picked=self._const(mb.cov_picked))
        if coef:        # its part of the mini-batch's aux (the micro-batches' parts sum to it)
            aux, self._aux_loss = self._aux_loss, None
            if aux is None:
                raise RuntimeError("model.moe.aux_loss_coef: the training forward returned no "
                                   "router logits")
            loss = loss + coef * aux
            metrics["moe/aux_loss"] = torch.tensor(self._aux_value)   # the mini-batch's value
            if lone:
                self._aux_weights = self._aux_value = None
        if mb.old_logp is None and rollout_logp is not None:
            # on-policy, so this forward IS the trainer's view of the rollout: measure the gap
            gap = (logp.detach() - rollout_logp).abs() * mask
            metrics["rollout/logprob_gap_mean"] = gap.sum() / mask.sum().clamp(min=1.0)
            metrics["rollout/logprob_gap_max"] = gap.max()
        return loss, metrics

    def _sft_micro_loss(self, tokens: TokenBatch, norm: LossNormalizers):
        """Masked next-token NLL of the response tokens, divided by the global token count."""
        from mindrl.backends.torch import packing

        logp, _ = packing.score(self, self.model, tokens, 1.0, None)
        mask = self._const(tokens.response_mask)
        nll = -(logp * mask).sum()
        return nll / norm.global_tokens, {"nll": nll.detach() / mask.sum().clamp(min=1.0)}

    def train_step(self, micro_batches: List[TrainBatch],
                   norm: LossNormalizers) -> Dict[str, float]:
        """Forward/backward every micro-batch of the RL loss, all-reduce (SUM) gradients across
        ranks, clip, AdamW step, scheduler step. ``old_logp is None`` = strictly on-policy
        (then, with ``rollout_logp``, also reports ``rollout/logprob_gap_mean|max``). A
        non-finite loss or gradient norm skips the update (``update_skipped`` = 1). Metrics
        are global (all micro-batches, all ranks)."""
        with self._mini_batch(micro_batches):
            return self._step([(mb.tokens, lambda mb=mb: self._micro_loss(mb, norm))
                               for mb in micro_batches])

    def gradients(self, micro_batches: List[TrainBatch], norm: LossNormalizers
                  ) -> Dict[str, np.ndarray]:
        """The summed RL-loss gradient of these micro-batches (one mini-batch) by parameter
        name, without a step (tests and debugging; this rank only, no all-reduce)."""
        self.model.zero_grad(set_to_none=True)
        with self._mini_batch(micro_batches):
            for mb in micro_batches:
                self._micro_loss(mb, norm)[0].backward()
        out = {n: p.grad.float().cpu().numpy().copy()
               for n, p in self.model.named_parameters() if p.grad is not None}
        self.model.zero_grad(set_to_none=True)
        return out

    @contextlib.contextmanager
    def _mini_batch(self, micro_batches: List[TrainBatch]):
        """The scope of one mini-batch's forward/backward passes: with
        ``model.moe.aux_loss_coef``, its expert shares are counted first (:meth:`_moe_balance`)."""
        if self.cfg.model.moe.aux_loss_coef:
            self._moe_balance([mb.tokens for mb in micro_batches])
        try:
            yield
        finally:
            self._aux_weights = self._aux_value = None

    def sft_step(self, micro_batches: List[TokenBatch], norm: LossNormalizers) -> Dict[str, float]:
        """One optimizer step of masked next-token NLL on the response tokens (token mean over
        ``norm.global_tokens``); metrics ``loss`` (the global mean NLL), ``nll``, grad_norm, lr."""
        return self._step([(tb, lambda tb=tb: self._sft_micro_loss(tb, norm))
                           for tb in micro_batches])

    def preference_step(self, micro_pairs, global_pairs: float) -> Dict[str, float]:
        """One optimizer step of the preference loss (``algorithms.preference_loss``:
        DPO / IPO / SimPO, plus ``pref_ftx`` x SFT). ``micro_pairs`` = [(chosen TokenBatch,
        rejected TokenBatch, ref_chosen (B, T) or None, ref_rejected (B, T) or None)];
        ``global_pairs`` = pairs in the whole step (all micro-batches, all ranks)."""
        return self._step([(ch, lambda m=(ch, rj, rc, rr): self._pref_micro_loss(*m, global_pairs))
                           for ch, rj, rc, rr in micro_pairs])

    def _pref_micro_loss(self, chosen: TokenBatch, rejected: TokenBatch, ref_chosen, ref_rejected,
                         global_pairs: float):
        from algorithms.preference import preference_loss

        from mindrl.backends.torch import packing

        logp_c, _ = packing.score(self, self.model, chosen, 1.0, None)
        logp_r, _ = packing.score(self, self.model, rejected, 1.0, None)
        return preference_loss(
            self.ops, chosen_logp=logp_c, chosen_mask=self._const(chosen.response_mask),
            rejected_logp=logp_r, rejected_mask=self._const(rejected.response_mask),
            ref_chosen_logp=self._const(ref_chosen), ref_rejected_logp=self._const(ref_rejected),
            cfg=self.cfg.preference, global_pairs=global_pairs)

    def _step(self, parts) -> Dict[str, float]:
        """``parts`` = [(TokenBatch, () -> (loss, metrics))]: accumulate, reduce, clip, step."""
        self.model.train()
        lr = self.optimizer.param_groups[0]["lr"]
        merger = MetricMerger()
        sync = self._profile_sync()
        fwd_bwd = Clock(self.phase_times, "train_fwd_bwd", sync).start()
        for i, (tb, loss_fn) in enumerate(parts):
            if self.fsdp:                  # reduce-scatter once, after the last micro-batch
                self.model.set_requires_gradient_sync(i == len(parts) - 1)
            loss, metrics = loss_fn()
            (loss * self.world if self.fsdp else loss).backward()
            self.masters.accumulate()      # low-precision grads -> float32 master grads
            merger.add({"loss": loss.detach(), **metrics}.items(), float(tb.response_mask.sum()))
        fwd_bwd.stop()
        optim = Clock(self.phase_times, "optimizer", sync).start()
        sums, maxes, mins, tokens = merger.parts()
        grads = self.masters.grads()      # float32: reduced, clipped and stepped in float32
        if self.world > 1:
            if not self.fsdp:              # FSDP reduce-scattered them in backward
                self._all_reduce_grads(grads)
            sums, maxes, mins, tokens = self._all_reduce_metrics(sums, maxes, mins, tokens)
        clip = self.cfg.train.grad_clip
        grad_norm = torch.nn.utils.clip_grad_norm_(self.masters.params,
                                                   clip if clip > 0 else math.inf)
        if hasattr(grad_norm, "full_tensor"):   # a DTensor under FSDP
            grad_norm = grad_norm.full_tensor()
        grad_norm = float(grad_norm)
        out = finish(sums, maxes, mins, tokens)
        finite = math.isfinite(grad_norm) and math.isfinite(out.get("loss", 0.0))
        if finite:
            self.optimizer.step()
            self.masters.publish()         # the model computes with the masters rounded
            self.scheduler.step()
            self.optimizer_steps += 1
        else:
            self.skipped_steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        optim.stop()
        self._staged = None
        out.update(grad_norm=grad_norm, lr=lr, update_skipped=float(not finite),
                   response_tokens=tokens)
        return out

    def _profile_sync(self):
        """logging.profile on an accelerator: synchronise at phase edges (else None)."""
        if not getattr(self.cfg.logging, "profile", False) or self.device.type == "cpu":
            return None
        return getattr(torch, self.device.type).synchronize

    def _all_reduce_grads(self, grads: List[torch.Tensor]) -> None:
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        flat = _flatten_dense_tensors(grads)     # the masters' float32 gradients
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        for g, r in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(r)

    def _all_reduce_metrics(self, sums, maxes, mins, tokens):
        import torch.distributed as dist

        def reduce(d: Dict[str, float], op, extra=()):
            keys = sorted(d)
            t = torch.tensor([d[k] for k in keys] + list(extra), dtype=torch.float64,
                             device=self.device)
            dist.all_reduce(t, op=op)
            return dict(zip(keys, t[:len(keys)].tolist())), t[len(keys):].tolist()

        sums, (tokens,) = reduce(sums, dist.ReduceOp.SUM, (tokens,))
        maxes, _ = reduce(maxes, dist.ReduceOp.MAX)
        mins, _ = reduce(mins, dist.ReduceOp.MIN)
        return sums, maxes, mins, tokens

    # ---------------------------------------------------------------- collectives
    @property
    def world_size(self) -> int:
        return self.world

    def all_reduce_sum(self, x, op: str = "sum") -> np.ndarray:
        """Element-wise SUM (or MIN / MAX) of a NumPy array over ranks, float64."""
        x = np.asarray(x, dtype=np.float64)
        if self.world == 1 or x.size == 0:
            return x
        import torch.distributed as dist

        red = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]
        t = torch.from_numpy(x.copy()).to(self.device)
        dist.all_reduce(t, op=red)
        return t.cpu().numpy()

    def all_gather(self, x) -> np.ndarray:
        """Concatenate equal-shaped arrays of all ranks along axis 0, in rank order."""
        x = np.asarray(x)
        if self.world == 1:
            return x
        import torch.distributed as dist

        t = torch.from_numpy(np.ascontiguousarray(np.atleast_1d(x))).to(self.device)
        parts = [torch.empty_like(t) for _ in range(self.world)]
        dist.all_gather(parts, t)
        out = torch.cat(parts).cpu().numpy()
        return out if x.ndim else out.reshape(self.world)

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    # ---------------------------------------------------------------- weights and state
    def named_tensors(self) -> Iterator[Tuple[str, torch.Tensor]]:
        """(HF name, tensor) for every entry of the policy's state_dict, in the model's dtype
        (model.dtype: the float32 masters rounded) and on its device (full tensors under FSDP:
        every rank calls this), one at a time: what an engine that takes torch tensors (vLLM)
        loads without a host round trip or a float32 copy. With LoRA: the base model's names,
        adapted weights merged (W + s * B A, from the adapters' float32 masters)."""
        if self.lora:
            from mindrl.backends.torch.lora import merged_named_tensors

            yield from merged_named_tensors(self.model, self.masters.master_of)
            return
        for name, t in self.model.state_dict().items():
            t = t.detach()
            if hasattr(t, "full_tensor"):       # FSDP shard: gathered (every rank calls this)
                t = t.full_tensor()
            if t.is_floating_point() and t.dtype != self.dtype:   # FSDP's float32 shards
                t = t.to(self.dtype)
            yield name, t

    def named_weights(self) -> Iterator[Tuple[str, np.ndarray]]:
        """(HF name, array) for every entry of the policy's state_dict (tied weights appear
        under both names, as in ``state_dict()``). bf16/fp16 are widened to float32 numpy."""
        for name, t in self.named_tensors():
            if t.dtype in (torch.bfloat16, torch.float16):
                t = t.float()
            yield name, t.cpu().numpy()

    def save_adapter(self, directory: str) -> None:
        """LoRA: the adapter alone (peft format), by the calling rank: what a rollout engine
        that runs LoRA itself (vLLM, ``rollout.vllm_lora``) loads each sync."""
        from mindrl.backends.torch.lora import save_adapter

        save_adapter(self.model, directory, self.model_path, self.lora)

    def stage_checkpoint(self) -> None:
        """FSDP: gather the full model and optimizer state to rank 0's CPU (collective; the
        trainer calls it on every rank before rank 0 writes the checkpoint)."""
        if not self.fsdp:
            return
        from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                             get_model_state_dict,
                                                             get_optimizer_state_dict)

        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        self._staged = (get_model_state_dict(self.model, options=opts),
                        get_optimizer_state_dict(self.model, self.optimizer, options=opts))

    def save_pretrained(self, directory: str) -> None:
        """HF-format weights (safetensors), config, generation config and tokenizer; written by
        rank 0 only (under FSDP from the state :meth:`stage_checkpoint` gathered)."""
        if self.fsdp and self._staged is None:
            raise RuntimeError("train.fsdp: call stage_checkpoint() on every rank first")
        if self.rank != 0:
            return
        Path(directory).mkdir(parents=True, exist_ok=True)
        if self.lora:                      # the adapter alone (peft format) + tokenizer
            from mindrl.backends.torch.lora import save_adapter

            save_adapter(self.model, directory, self.model_path, self.lora)
            self.tokenizer.save_pretrained(directory)
            return
        kw = {}
        if self.fsdp:                      # float32 shards gathered: saved in model.dtype
            state = {k: v.to(self.dtype) if v.is_floating_point() else v
                     for k, v in self._staged[0].items()}
            if getattr(self.model.config, "tie_word_embeddings", False):
                state.pop("lm_head.weight", None)     # written once, as an unsharded save does
            kw = {"state_dict": state}
        self.model.save_pretrained(directory, safe_serialization=True, **kw)
        _set_config_dtype(Path(directory), self.cfg.model.dtype)
        self.tokenizer.save_pretrained(directory)

    def load_pretrained(self, directory: str) -> None:
        """Load policy weights written by :meth:`save_pretrained` (resume); the reference
        model keeps the original weights."""
        from safetensors.torch import load_file

        if self.lora:
            from mindrl.backends.torch.lora import load_adapter

            with self.masters.widened():   # into the float32 masters, then rounded
                return load_adapter(self.model, directory, self.lora)
        files = sorted(Path(directory).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no *.safetensors weights in {directory}")
        state = {}
        if not self.fsdp or self.rank == 0:
            for f in files:
                state.update(load_file(str(f)))
        if self.fsdp:                       # rank 0 reads, every rank keeps its shard
            from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                                 set_model_state_dict)

            out = set_model_state_dict(self.model, state, options=StateDictOptions(
                full_state_dict=True, broadcast_from_rank0=True, strict=False))
            missing, unexpected = [], []
            if self.rank == 0:
                missing, unexpected = list(out.missing_keys), list(out.unexpected_keys)
        else:
            with self.masters.widened():   # into the float32 masters, then rounded
                missing, unexpected = self.model.load_state_dict(state, strict=False)
        if getattr(self.model.config, "tie_word_embeddings", False):
            missing = [k for k in missing if k != "lm_head.weight"]   # saved once, tied
        if missing or unexpected:
            raise RuntimeError(f"weights in {directory} do not match the model: missing "
                               f"{missing[:5]}, unexpected {unexpected[:5]}")

    load_pretrained_weights = load_pretrained

    def save_state(self, directory: str) -> None:
        """Optimizer + scheduler (rank 0: identical on all ranks) and each rank's RNG state."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if self.rank == 0:
            optim = None if self.fsdp else self.optimizer.state_dict()
            if self.fsdp:                  # full state, read by rank 0 alone on resume
                torch.save(self._staged[1], d / "torch_optim_full.pt")
                if self.dtype != torch.float32:     # the float32 parameters (the masters)
                    torch.save(self._staged[0], d / FSDP_MASTERS)
                self._staged = None
            torch.save({"optimizer": optim, "fsdp": self.fsdp,
                        # float32 masters of a bf16/fp16 model: the saved model is rounded
                        "masters": None if self.fsdp else self.masters.state_dict()["masters"],
                        "scheduler": self.scheduler.state_dict(),
                        "optimizer_steps": self.optimizer_steps,
                        "skipped_steps": self.skipped_steps}, d / "torch_optim.pt")
        if self.critic is not None:
            self.critic.save_state(directory)
        rng = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        torch.save(rng, d / f"torch_rng_rank{self.rank}.pt")

    def load_state(self, directory: str) -> None:
        """Restore what :meth:`save_state` wrote; also the policy weights when ``directory``
        holds safetensors from :meth:`save_pretrained`."""
        d = Path(directory)
        if any(d.glob("*.safetensors")):
            self.load_pretrained(directory)
        state = load_state_file(d / "torch_optim.pt", "cpu" if self.fsdp else self.device)
        if state.get("fsdp", False) != self.fsdp:
            raise ValueError(f"{d} was written with train.fsdp={state.get('fsdp', False)}; this "
                             f"run has train.fsdp={self.fsdp} (the optimizer state layouts differ)")
        if self.fsdp:
            from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                                 set_model_state_dict,
                                                                 set_optimizer_state_dict)

            full, masters = {}, {}
            if self.rank == 0:
                full = load_state_file(d / "torch_optim_full.pt", "cpu")
                if (d / FSDP_MASTERS).is_file():
                    masters = load_state_file(d / FSDP_MASTERS, "cpu")
            if self.dtype != torch.float32 and self.all_reduce_sum([len(masters)])[0] > 0:
                set_model_state_dict(self.model, masters, options=StateDictOptions(
                    full_state_dict=True, broadcast_from_rank0=True, strict=False))
            set_optimizer_state_dict(self.model, self.optimizer, optim_state_dict=full,
                                     options=StateDictOptions(full_state_dict=True,
                                                              broadcast_from_rank0=True))
        else:
            if self.masters.mixed and state.get("masters") is not None:
                self.masters.load_state_dict({"masters": state["masters"]},
                                             str(d / "torch_optim.pt"))
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.optimizer_steps = state["optimizer_steps"]
        self.skipped_steps = state["skipped_steps"]
        if self.critic is not None:
            self.critic.load_state(directory)
        rng_file = d / f"torch_rng_rank{self.rank}.pt"
        if rng_file.is_file():
            rng = load_state_file(rng_file, "cpu")
            torch.set_rng_state(rng["torch"])
            if "cuda" in rng and self.device.type == "cuda":
                torch.cuda.set_rng_state(rng["cuda"], self.device)

    def sampling_model(self):
        """(model, shared) for a sampler: the policy itself (``shared=True``), or under FSDP an
        unsharded copy (sampling must not run the sharded model's collectives rank by rank).
        :func:`mindrl.rollout.native_torch.make_native_engine` wraps it in an engine."""
        if self.fsdp:
            from transformers import AutoModelForCausalLM

            copy = AutoModelForCausalLM.from_pretrained(
                self.model_path, local_files_only=True, dtype=DTYPES[self.cfg.model.dtype],
                trust_remote_code=self.cfg.model.trust_remote_code).to(self.device).eval()
            copy.requires_grad_(False)
            return copy, False
        return self.model, True
