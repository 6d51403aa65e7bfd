"""The MoE load-balancing loss of an RL mini-batch on the torch backend
(``model.moe.aux_loss_coef``).

Definition (transformers' ``load_balancing_loss_func``, Switch Transformer eq. 4-6, k experts
per token): over the R = (MoE layers) x (real tokens) rows of the whole mini-batch, all
micro-batches and all data-parallel ranks,

    f_e = (1/R) sum_rows [e in the router's native top-k]     (no gradient)
    P_e = (1/R) sum_rows softmax(router logits)_e
    aux = E x sum_e f_e P_e

f is a count, so the gradient is E/R x sum_e f_e x d(sum_rows p_e). A no-grad pre-pass over the
mini-batch (:func:`router_sums` per micro-batch, summed and all-reduced) fixes f and R; each
micro-batch then adds ``(sum over its rows of p) . weights`` with ``weights = E f / R``
(:func:`balance_term`). The micro-batches' terms sum to aux exactly, so the gradient does not
depend on how the mini-batch is cut (``train.micro_batch_size``, packing).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch


def router_sums(router_logits: Sequence[torch.Tensor], mask: Optional[torch.Tensor], top_k: int
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per MoE layer (N, E) router logits and the (N,) 0/1 real-token mask (None: all real) ->
    float64 (top-k counts (E,), probability sums (E,), rows ()) over layers and real tokens."""
    E = router_logits[0].shape[-1]
    dev = router_logits[0].device
    counts = torch.zeros(E, dtype=torch.float64, device=dev)
    probs = torch.zeros(E, dtype=torch.float64, device=dev)
    rows = torch.zeros((), dtype=torch.float64, device=dev)
    for z in router_logits:
        w = (torch.ones(z.shape[0], device=dev) if mask is None
             else mask.reshape(-1).to(dev)).double()
        p = torch.softmax(z.double(), dim=-1)
        top = torch.topk(p, top_k, dim=-1).indices                        # (N, k)
        counts += torch.zeros(E, dtype=torch.float64, device=dev).scatter_add_(
            0, top.reshape(-1), w.repeat_interleave(top_k))
        probs += (p * w[:, None]).sum(0)
        rows += w.sum()
    return counts, probs, rows


def balance_term(router_logits: Sequence[torch.Tensor], mask: Optional[torch.Tensor],
                 weights: torch.Tensor) -> torch.Tensor:
    """This micro-batch's part of the mini-batch's aux: sum over its MoE layers and real tokens
    of softmax(logits) . weights (float32, differentiable; ``weights`` (E,) = E f / R)."""
    total = None
    for z in router_logits:
        p = torch.softmax(z.float(), dim=-1)                              # (N, E)
        if mask is not None:
            p = p * mask.reshape(-1, 1).to(p)
        t = (p.sum(0) * weights.to(p)).sum()
        total = t if total is None else total + t
    return total
