"""The PPO critic of the torch backend: the policy's decoder (transformers) plus a scalar value
head, trained with its own AdamW on :func:`algorithms.value_loss` and all-reduced (SUM) across
torchrun ranks like the policy. See :mod:`mindrl.backends.critic_files` for where its weights
come from and how they are saved.

Values V(s_t) sit where the policy's logits for response token t sit: the final hidden state at
position P - 1 + t (the prefix before token t), so V (B, T) lines up with the response mask.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch

from mindrl.backends.critic_files import (CRITIC_DIR, CRITIC_WEIGHTS, HEAD_BIAS, HEAD_WEIGHT, critic_source,
                                          fresh_head, read_critic, write_critic)
from mindrl.backends.metrics import MetricMerger, finish
from mindrl.types import LossNormalizers, TokenBatch, ValueBatch

OPTIM_FILE = "critic_optim.pt"


class TorchCritic(torch.nn.Module):
    """``backbone`` (a transformers decoder, e.g. Qwen2Model) + ``score`` (Linear H -> 1)."""

    def __init__(self, backend):
        from transformers import AutoModelForCausalLM

        super().__init__()
        cfg = self.cfg = backend.cfg
        self.backend = backend
        self.device = backend.device
        kind, src = critic_source(cfg, backend.model_path)
        # read in float32: the optimizer's masters; the backbone computes in model.dtype
        load = dict(local_files_only=True, dtype=torch.float32,
                    trust_remote_code=cfg.model.trust_remote_code)
        lm = AutoModelForCausalLM.from_pretrained(src if kind == "hf" else backend.model_path,
                                                  **load)
        self.backbone = lm.model                       # the decoder without its LM head
        hidden = lm.config.hidden_size
        del lm
        self.score = torch.nn.Linear(hidden, 1)        # float32: values are read in fp32
        if kind == "critic":
            self.load_arrays(read_critic(src))
        else:
            self._set_head(fresh_head(hidden, cfg.critic.head_init_std, cfg.train.seed))
        self.to(self.device)
        if cfg.model.gradient_checkpointing:
            self.backbone.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
        if backend.world > 1:                          # identical start on every rank
            import torch.distributed as dist

            for p in self.parameters():
                dist.broadcast(p.data, src=0)
        from mindrl.backends.torch.optim import make_optimizer

        # float32 masters of the backbone (a model.dtype compute copy); the head stays float32
        self.masters, self.optimizer, self.scheduler = make_optimizer(
            self, backend.dtype, cfg, cfg.critic.lr, cfg.critic.weight_decay, keep=("score",))
        self.params = self.masters.model_params
        self.optimizer_steps = 0

    # ------------------------------------------------------------------ weights
    def _set_head(self, arrays: Dict[str, np.ndarray]) -> None:
        with torch.no_grad():
            self.score.weight.copy_(torch.from_numpy(arrays[HEAD_WEIGHT]))
            self.score.bias.copy_(torch.from_numpy(arrays[HEAD_BIAS]))

    def _widened(self):
        """The float32 masters in the modules (once the optimizer exists)."""
        import contextlib

        masters = getattr(self, "masters", None)
        return masters.widened() if masters is not None else contextlib.nullcontext()

    def arrays(self) -> Dict[str, np.ndarray]:
        """HF-named float32 arrays: ``model.*`` (the decoder's float32 masters) and
        ``score.*``."""
        with self._widened():
            out = {f"model.{k}": v.detach().float().cpu().numpy()
                   for k, v in self.backbone.state_dict().items()}
        out[HEAD_WEIGHT] = self.score.weight.detach().float().cpu().numpy()
        out[HEAD_BIAS] = self.score.bias.detach().float().cpu().numpy()
        return out

    def load_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        body = {k[len("model."):]: torch.from_numpy(np.asarray(v)) for k, v in arrays.items()
                if k.startswith("model.")}
        with self._widened():
            missing, unexpected = self.backbone.load_state_dict(body, strict=False)
        missing = [k for k in missing if not k.endswith("rotary_emb.inv_freq")]
        if missing or unexpected or HEAD_WEIGHT not in arrays:
            raise ValueError(f"critic weights do not match the model: missing "
                             f"{(missing + ([HEAD_WEIGHT] if HEAD_WEIGHT not in arrays else []))[:5]},"
                             f" unexpected {list(unexpected)[:5]}")
        self._set_head(arrays)

    # ------------------------------------------------------------------ values
    def forward_values(self, batch: TokenBatch) -> torch.Tensor:
        """(B, T) float32 V(s_t) at the positions that predict the T response tokens."""
        ids, att, pos = self.backend._tensors(batch)
        T = batch.response_len
        h = self.backbone(input_ids=ids, attention_mask=att, position_ids=pos,
                          use_cache=False).last_hidden_state[:, -T - 1:-1]
        return self.score(h.float()).squeeze(-1)

    @torch.no_grad()
    def values(self, batch: TokenBatch, micro_batch_size: int = 8) -> np.ndarray:
        """(B, T) float32 values of the response positions, 0 at padding."""
        self.eval()
        out = []
        for s in range(0, len(batch), micro_batch_size):
            mb = batch.rows(slice(s, s + micro_batch_size))
            v = self.forward_values(mb) * torch.from_numpy(mb.response_mask).to(self.device)
            out.append(v.cpu().numpy())
        return np.concatenate(out).astype(np.float32)

    # ------------------------------------------------------------------ training
    def micro_loss(self, mb: ValueBatch, norm: LossNormalizers):
        from algorithms.value_loss import value_loss

        c = self.cfg.critic
        const = self.backend._const
        return value_loss(self.backend.ops, values=self.forward_values(mb.tokens),
                          old_values=const(mb.old_values), returns=const(mb.returns),
                          response_mask=const(mb.tokens.response_mask),
                          cliprange_value=c.cliprange_value, loss_agg_mode=c.loss_agg_mode,
                          global_tokens=norm.global_tokens, global_seqs=norm.global_seqs,
                          max_len=norm.max_len)

    def step(self, micro_batches: List[ValueBatch], norm: LossNormalizers) -> Dict[str, float]:
        """One critic optimizer step: accumulate the value loss of every micro-batch,
        all-reduce (SUM) across ranks, clip, AdamW, schedule. Metrics (unprefixed): loss,
        vf_clipfrac, vpred_mean, grad_norm, lr."""
        self.train()
        lr = self.optimizer.param_groups[0]["lr"]
        merger = MetricMerger()
        for mb in micro_batches:
            loss, metrics = self.micro_loss(mb, norm)
            loss.backward()
            self.masters.accumulate()      # float32 master gradients
            merger.add({"loss": loss.detach(), **metrics}.items(),
                       float(mb.tokens.response_mask.sum()))
        sums, maxes, mins, tokens = merger.parts()
        grads = self.masters.grads()
        if self.backend.world > 1:
            self._all_reduce(grads)
            sums, maxes, mins, tokens = self.backend._all_reduce_metrics(sums, maxes, mins,
                                                                         tokens)
        clip = self.cfg.critic.grad_clip
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.masters.params,
                                                         clip if clip > 0 else math.inf))
        out = finish(sums, maxes, mins, tokens)
        if math.isfinite(grad_norm) and math.isfinite(out.get("loss", 0.0)):
            self.optimizer.step()
            self.masters.publish()
            self.scheduler.step()
            self.optimizer_steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        out.update(grad_norm=grad_norm, lr=lr)
        return out

    def gradients(self, micro_batches: List[ValueBatch], norm: LossNormalizers
                  ) -> Dict[str, np.ndarray]:
        """The summed value-loss gradient by HF name, without a step (tests)."""
        self.zero_grad(set_to_none=True)
        for mb in micro_batches:
            self.micro_loss(mb, norm)[0].backward()
        names = {id(p): n for n, p in self.named_parameters()}
        out = {}
        for p in self.params:
            n = names[id(p)]
            n = HEAD_WEIGHT if n == "score.weight" else HEAD_BIAS if n == "score.bias" else \
                "model." + n[len("backbone."):]
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            out[n] = g.float().cpu().numpy().copy()
        self.zero_grad(set_to_none=True)
        return out

    def _all_reduce(self, grads: List[torch.Tensor]) -> None:
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        for g, r in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(r)

    # ------------------------------------------------------------------ state
    def save_state(self, directory: str) -> None:
        """critic.safetensors + the critic's optimizer and scheduler (rank 0)."""
        if self.backend.rank != 0:
            return
        d = Path(directory) / CRITIC_DIR
        d.mkdir(parents=True, exist_ok=True)
        write_critic(d / CRITIC_WEIGHTS, self.arrays())
        torch.save({"optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "optimizer_steps": self.optimizer_steps}, d / OPTIM_FILE)

    def load_state(self, directory: str) -> None:
        from mindrl.errors import UserError

        d = Path(directory) / CRITIC_DIR
        for f in (CRITIC_WEIGHTS, OPTIM_FILE):
            if not (d / f).is_file():
                raise UserError(f"{d / f} is missing: the checkpoint has no critic state "
                                "(was it written by a run without algorithm.adv_estimator=gae?)")
        self.load_arrays(read_critic(str(d / CRITIC_WEIGHTS)))
        try:              # tensors and plain values only: nothing in a run dir is unpickled
            state = torch.load(d / OPTIM_FILE, map_location=self.device, weights_only=True)
        except Exception as e:
            raise UserError(f"{d / OPTIM_FILE}: refused to load: {e}") from None
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.optimizer_steps = state["optimizer_steps"]


def build_critic(backend):
    """The critic when the run needs one (``algorithm.adv_estimator: gae``), else None."""
    from mindrl.backends.critic_files import needs_critic

    return TorchCritic(backend) if needs_critic(backend.cfg) else None
