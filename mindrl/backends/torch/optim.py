"""The torch backends' optimizer: float32 master weights, AdamW and its learning-rate schedule.

Mixed precision (``model.dtype`` bfloat16 / float16): the model computes in ``model.dtype``
while the optimizer owns float32 *master* copies of the trainable parameters. A backward leaves
low-precision gradients on the model; :meth:`MasterWeights.accumulate` adds them into float32
gradients on the masters (so micro-batch accumulation, the all-reduce, the norm and the clip run
in float32); AdamW steps the masters; :meth:`MasterWeights.publish` writes each master rounded
(round-to-nearest-even) back into the model. Without the masters an AdamW update smaller than
half a bfloat16 step of the weight (2^-9 relative) is rounded away: at |w| = 0.02 and lr 1e-6,
nearly every update.

The model parameters *are* the compute copy (the compute dtype never changes), so everything
that reads the model -- scoring, the native sampler, vLLM weight sync, LoRA merges, the Hugging
Face checkpoint -- sees the rounded masters. Parameters that are float32 already are their own
masters (``model.dtype: float32``, the critic's value head, FSDP2's float32 shards).
"""

from __future__ import annotations

import contextlib
from typing import Dict, List, Tuple

import torch

from mindrl.backends.schedule import lr_factor, total_optimizer_steps


class MasterWeights:
    """float32 masters of ``params`` (the trainable parameters of a model), in order.

    ``params[i]`` is a low-precision compute copy with its own master ``masters[i]``, or
    float32 and then its own master (``masters[i] is params[i]``)."""

    def __init__(self, params: List[torch.nn.Parameter], masters: List[torch.Tensor]):
        self.model_params = list(params)
        self.params = list(masters)          # what AdamW steps: float32 leaves
        self._pairs = [(p, m) for p, m in zip(self.model_params, self.params) if p is not m]
        self._by_id = {id(p): m for p, m in self._pairs}
        self._grad_buffers: Dict[int, torch.Tensor] = {}   # pair index -> float32 gradient

    @classmethod
    def take(cls, model: torch.nn.Module, dtype: torch.dtype,
             keep: Tuple[str, ...] = ()) -> "MasterWeights":
        """Masters of ``model``'s trainable parameters from a model loaded in float32: each
        float32 tensor becomes the master and the parameter a ``dtype`` copy; frozen floating
        parameters (a LoRA base) are cast to ``dtype`` alone. Buffers keep their dtype, as a
        load in ``dtype`` leaves them (rotary frequencies stay float32). Modules the model
        keeps in float32 (``_keep_in_fp32_modules``, and the module names in ``keep``) stay
        float32."""
        keep = tuple(getattr(model, "_keep_in_fp32_modules", None) or ()) + tuple(keep)
        params, masters = [], []
        for name, p in model.named_parameters():
            fp32_kept = any(k in name.split(".") for k in keep)
            if p.requires_grad:
                params.append(p)
                if dtype == torch.float32 or fp32_kept or not p.is_floating_point():
                    masters.append(p)
                    continue
                if p.dtype != torch.float32:
                    raise ValueError(f"{name}: master weights need the model loaded in float32 "
                                     f"(got {p.dtype})")
                master = p.data
                p.data = master.to(dtype)
                masters.append(master)
            elif p.is_floating_point() and not fp32_kept and p.dtype != dtype:
                p.data = p.data.to(dtype)
        return cls(params, masters)

    @property
    def mixed(self) -> bool:
        """Whether any parameter computes in a lower precision than its master."""
        return bool(self._pairs)

    def master_of(self, t: torch.Tensor) -> torch.Tensor:
        """The float32 master of parameter ``t`` (``t`` itself when it is float32)."""
        return self._by_id.get(id(t), t)

    def accumulate(self) -> None:
        """After a backward: add the model's gradients into the masters' float32 gradients and
        clear them on the model (accumulation over micro-batches in float32).

        On CPU the float32 gradients live in buffers kept from step to step
        (:attr:`_grad_buffers`): a fresh tensor of a (V, H) head's size is page-faulted in on
        its first write, which cost more than the widening itself (0.27 s against 0.04 s at
        151,936 x 896 in bf16). The first micro-batch's gradient is widened into the buffer,
        the later ones are widened a slice at a time into a small scratch and added from it
        (torch's mixed-dtype ``add_`` casts element by element, ~6x slower). The sums are the
        same float32 operations as ``m.grad + g.float()`` (widening bf16 is exact)."""
        for i, (p, m) in enumerate(self._pairs):
            g = p.grad
            if g is None:
                continue
            if m.grad is None:
                buf = self._grad_buffer(i, g)
                m.grad = g.float() if buf is None else buf.copy_(g)
            elif m.grad.is_sparse or g.is_sparse or g.device.type != "cpu":
                m.grad.add_(g.float())
            else:
                _add_widened(m.grad, g)
            p.grad = None

    def _grad_buffer(self, i: int, g: torch.Tensor):
        """The kept float32 gradient buffer of pair ``i`` for gradient ``g`` (None where none
        is kept: not on CPU, or a sparse gradient)."""
        if g.device.type != "cpu" or g.is_sparse or not KEEP_GRAD_BUFFERS:
            return None
        m = self._pairs[i][1]
        buf = self._grad_buffers.get(i)
        if buf is None or buf.shape != m.shape:
            buf = torch.empty_like(m, memory_format=torch.contiguous_format)
            self._grad_buffers[i] = buf
        return buf

    def grads(self) -> List[torch.Tensor]:
        """The masters' gradients (float32), a zero one where a parameter got none; set on the
        masters so the all-reduce and the clip act on them."""
        for m in self.params:
            if m.grad is None:
                m.grad = torch.zeros_like(m)
            elif m.grad.is_sparse:         # a sparse embedding's gradient without the head's
                m.grad = m.grad.to_dense()
        return [m.grad for m in self.params]

    @torch.no_grad()
    def publish(self) -> None:
        """Write every master, rounded to the compute dtype, into its model parameter."""
        for p, m in self._pairs:
            p.copy_(m)

    @contextlib.contextmanager
    def widened(self):
        """Inside, the model's trainable parameters hold their float32 masters (weights loaded
        into the model then land in the masters at full precision; arrays read from it are the
        masters); on exit each parameter is its master rounded again."""
        compute = [p.data for p, _ in self._pairs]
        for p, m in self._pairs:
            p.data = m
        try:
            yield
        finally:
            for (p, _), c in zip(self._pairs, compute):
                p.data = c
            self.publish()

    def state_dict(self) -> Dict[str, List[torch.Tensor]]:
        """The masters that are not the parameters themselves (for an exact resume)."""
        return {"masters": [m.detach().clone() for _, m in self._pairs]}

    @torch.no_grad()
    def load_state_dict(self, state: Dict[str, List[torch.Tensor]], where: str) -> None:
        saved = state.get("masters", [])
        if len(saved) != len(self._pairs) or any(
                tuple(s.shape) != tuple(m.shape) for s, (_, m) in zip(saved, self._pairs)):
            from mindrl.errors import UserError

            raise UserError(f"{where}: its float32 master weights ({len(saved)} tensors) do not "
                            f"match this run's ({len(self._pairs)}): was it written with "
                            "another model.dtype or model?")
        for s, (_, m) in zip(saved, self._pairs):
            m.copy_(s)
        self.publish()


# Keep the float32 master gradients' memory from step to step on CPU (MasterWeights.accumulate)
KEEP_GRAD_BUFFERS = True
_SCRATCH_ELEMENTS = 1 << 20          # 4 MB of float32: a slice widened and added while in cache


def _add_widened(acc: torch.Tensor, g: torch.Tensor) -> None:
    """``acc += g.float()`` (``acc`` float32, ``g`` dense, same shape) without a float32 copy of
    all of ``g``: a slice at a time through a small scratch tensor."""
    if g.dtype == acc.dtype or g.numel() <= _SCRATCH_ELEMENTS or not acc.is_contiguous() \
            or not g.is_contiguous():
        acc.add_(g.float() if g.dtype != acc.dtype else g)
        return
    a, b = acc.view(-1), g.view(-1)
    scratch = torch.empty(_SCRATCH_ELEMENTS, dtype=acc.dtype, device=acc.device)
    for s in range(0, b.numel(), _SCRATCH_ELEMENTS):
        n = min(_SCRATCH_ELEMENTS, b.numel() - s)
        w = scratch[:n].copy_(b[s:s + n])
        a[s:s + n].add_(w)


# AdamW's one-pass kernel (``fused=True``) where torch has one: on CPU the default loops over
# the parameters with a kernel per operation, each a pass over the tensor with fresh temporaries
# (at V = 151,936 a tied head's step read and wrote ~10 x 545 MB; fused: 7x faster, measured)
FUSED_ADAMW = True


def fused_adamw(params) -> bool:
    """Whether AdamW over ``params`` runs torch's fused kernel: plain (not sharded DTensor)
    floating-point tensors on CPU or CUDA (FSDP2's DTensor shards keep torch's default)."""
    return FUSED_ADAMW and bool(params) and all(
        type(p) in (torch.Tensor, torch.nn.Parameter) and p.is_floating_point()
        and p.device.type in ("cpu", "cuda") for p in params)


def make_adamw(params, cfg, lr: float, weight_decay: float):
    """AdamW over ``params`` (float32 masters; train.betas, train.adam_eps) and its warm-up /
    decay schedule over the run's optimizer steps: the policy's, and the PPO critic's with its
    own lr."""
    t = cfg.train
    params = list(params)
    optimizer = torch.optim.AdamW(params, lr=lr, betas=tuple(t.betas), eps=t.adam_eps,
                                  weight_decay=weight_decay, fused=fused_adamw(params) or None)
    total = total_optimizer_steps(cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, warmup=t.warmup_steps, total=total,
                                       schedule=t.lr_schedule, min_ratio=t.min_lr_ratio))
    return optimizer, scheduler


def make_optimizer(model: torch.nn.Module, dtype: torch.dtype, cfg, lr: float,
                   weight_decay: float, keep: Tuple[str, ...] = ()):
    """The one optimizer construction of every torch training path (the policy under RL, SFT,
    preference, distillation and LoRA; the PPO critic): float32 masters of ``model``'s
    trainable parameters (loaded in float32; cast here to ``dtype``), AdamW over them and its
    schedule -> (MasterWeights, optimizer, scheduler). ``keep``: module names that stay
    float32."""
    masters = MasterWeights.take(model, dtype, keep)
    optimizer, scheduler = make_adamw(masters.params, cfg, lr, weight_decay)
    return masters, optimizer, scheduler
