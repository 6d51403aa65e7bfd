"""The torch native sampler's decode loop: each prompt prefilled once per group, finished rows
leave the batch.

transformers ``generate`` runs every row to the longest one: on mixed-length rollouts (a mean
response of 28 of 128 tokens) most of its decode work is on rows that already stopped, and it
prefills each prompt n times for a group of n samples. This loop

- prefills the B distinct prompts once (left-padded, position ids from the attention mask),
  then repeats each prompt's KV cache and last logits n times (``batch_repeat_interleave``);
- samples one token per live row from the tempered, truncated logits (the distribution the
  trainer recomputes, :func:`mindrl.backends.torch.truncation.truncated_logits`), records its
  log-prob under that distribution, and drops the rows that emitted a stop token from the KV
  cache and the batch (``batch_select_indices``) before the next forward;
- calls ``on_group_done(group, responses)`` as soon as every sample of a group has stopped, so
  the caller can score it while other groups still decode.

A model attribute ``mindrl_logits_hook``, when set, is called once per call with the number of
rows and returns ``step(row_ids, t, logits) -> logits``, applied to the raw logits of the live
rows (their ids in the call's prompt-major order) at response position ``t``: the benchmarks
force response lengths with it, the same lengths they force on ``generate``.

Greedy decoding gives the tokens ``generate`` gives (tested); sampling draws from the same
distribution with a different use of the random stream, so a seed gives different (equally
distributed) samples than ``generate`` with that seed.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np


def decode(model, prompts: Sequence[Sequence[int]], n: int, max_new_tokens: int,
           stop_ids: Sequence[int], pad_id: int, temperature: float, trunc=None,
           device=None, on_group_done: Optional[Callable[[int, List[List[int]]], None]] = None,
           routes_out: Optional[list] = None, interrupt: Optional[Callable[[], bool]] = None,
           done_tokens: Optional[Sequence[int]] = None, packed_weights: bool = False
           ) -> Tuple[List[List[int]], List[np.ndarray], List[str]]:
    """Sample ``n`` responses for each prompt: (response ids per row, log-probs per row, finish
    reason per row), rows prompt-major (prompt 0's n samples first). ``temperature <= 0`` is
    greedy (log-probs at temperature 1). Response ids include the stop token; a row that never
    stops ends at ``max_new_tokens`` with reason ``"length"``.

    ``routes_out`` (a list, mixture-of-experts models): receives each row's expert choices,
    ``(len(prompt) + len(response) - 1, num_hidden_layers, k)`` int16 for the tokens the model
    was fed (:mod:`mindrl.backends.torch.moe_replay`).

    ``interrupt`` (partial rollouts): called after each decode step; when it returns True the
    rows still decoding end there with reason ``"interrupted"`` (their tokens and log-probs kept,
    to be continued later). ``done_tokens`` (per prompt): tokens a continued generation already
    has; they only shift the position a ``model.mindrl_logits_hook`` sees.

    ``packed_weights`` (CPU): the decode steps (not the prefill) run the model's linear layers
    on weights packed once for the call (:class:`mindrl.backends.torch.decode_linear.
    PackedLinears`: each weight packed at its first decode-step call that uses it, the copies
    freed when the call returns)."""
    import contextlib

    import torch

    device = device if device is not None else next(model.parameters()).device
    B0 = len(prompts)
    rows_total = B0 * n
    responses: List[List[int]] = [[] for _ in range(rows_total)]
    logps: List[List[float]] = [[] for _ in range(rows_total)]
    reasons = ["length"] * rows_total
    if B0 == 0 or max_new_tokens <= 0:
        return responses, [np.zeros(0, np.float32) for _ in responses], reasons
    greedy = temperature <= 0
    inv_t = 1.0 if greedy else 1.0 / temperature
    stop = torch.tensor(sorted(set(int(s) for s in stop_ids)) or [-1], device=device)

    P = max(len(p) for p in prompts)
    ids = torch.full((B0, P), int(pad_id), dtype=torch.long)
    att = torch.zeros((B0, P), dtype=torch.long)
    for i, p in enumerate(prompts):                                 # left-pad
        ids[i, P - len(p):] = torch.tensor(list(p), dtype=torch.long)
        att[i, P - len(p):] = 1
    ids, att = ids.to(device), att.to(device)
    hooks = packer = None
    if routes_out is not None:
        from mindrl.backends.torch.moe_replay import RouterHooks

        hooks = RouterHooks.of(model)
    if packed_weights and device.type == "cpu":
        from mindrl.backends.torch.decode_linear import PackedLinears

        packer = PackedLinears(model)
    with hooks.recording() if hooks is not None else contextlib.nullcontext(), \
            packer if packer is not None else contextlib.nullcontext():
        return _decode(model, prompts, n, max_new_tokens, stop, pad_id, greedy, inv_t, trunc,
                       device, on_group_done, ids, att, responses, logps, reasons, hooks,
                       routes_out, interrupt, done_tokens, packer)


def _decode(model, prompts, n, max_new_tokens, stop, pad_id, greedy, inv_t, trunc, device,
            on_group_done, ids, att, responses, logps, reasons, hooks, routes_out, interrupt,
            done_tokens, packer):
    import torch
    from transformers import DynamicCache

    from mindrl.backends.torch.truncation import truncated_logits

    B0, P = ids.shape
    rows_total = B0 * n
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    try:
        out = model(input_ids=ids, attention_mask=att, position_ids=pos, past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
    except TypeError:           # a remote-code model without logits_to_keep: all positions
        cache = DynamicCache(config=model.config)
        out = model(input_ids=ids, attention_mask=att, position_ids=pos, past_key_values=cache,
                    use_cache=True)
    logits = out.logits[:, -1].float()
    next_pos = pos[:, -1] + 1
    row_routes: List[List[np.ndarray]] = []
    if hooks is not None:                                          # prompt routes, per row
        pr = hooks.pop(B0, P)
        row_routes = [[pr[r // n, P - len(prompts[r // n]):]] for r in range(rows_total)]
    if n > 1:                                                       # one prefill per group
        cache.batch_repeat_interleave(n)
        logits, att, next_pos = (x.repeat_interleave(n, 0) for x in (logits, att, next_pos))
    live = torch.arange(rows_total, device=device)                 # row id of each batch row
    hook = getattr(model, "mindrl_logits_hook", None)
    step_hook = hook(rows_total) if hook is not None else None
    left = [n] * B0                                                 # unstopped samples per group
    offset = None if done_tokens is None else torch.tensor(
        [int(done_tokens[r // n]) for r in range(rows_total)], device=device)
    for t in range(max_new_tokens):
        if step_hook is not None:
            logits = step_hook(live, t if offset is None else offset[live] + t, logits)
        z = truncated_logits(logits * inv_t, trunc)
        logp_all = torch.log_softmax(z, dim=-1)
        if greedy:
            tok = z.argmax(-1)
        else:
            tok = torch.multinomial(logp_all.exp(), 1).squeeze(-1)
        lp = logp_all.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
        done = torch.isin(tok, stop)
        live_l, tok_l, lp_l, done_l = (live.tolist(), tok.tolist(), lp.tolist(),
                                       done.tolist())
        for r, k, v, d in zip(live_l, tok_l, lp_l, done_l):
            responses[r].append(k)
            logps[r].append(v)
            if d:
                reasons[r] = "stop"
                g = r // n
                left[g] -= 1
                if left[g] == 0 and on_group_done is not None and t < max_new_tokens - 1:
                    on_group_done(g, [responses[j] for j in range(g * n, (g + 1) * n)])
        if t == max_new_tokens - 1:
            break
        if interrupt is not None and not all(done_l) and interrupt():
            for r, d in zip(live_l, done_l):
                if not d:
                    reasons[r] = "interrupted"
            break
        if any(done_l):
            keep = (~done).nonzero().squeeze(-1)
            if keep.numel() == 0:
                break
            cache.batch_select_indices(keep)
            live, tok, att, next_pos = live[keep], tok[keep], att[keep], next_pos[keep]
        att = torch.cat([att, att.new_ones((att.shape[0], 1))], dim=1)
        if packer is not None:
            packer.pack()                                  # once, before the first decode step
        out = model(input_ids=tok.unsqueeze(-1), attention_mask=att,
                    position_ids=next_pos.unsqueeze(-1), past_key_values=cache, use_cache=True)
        if hooks is not None:
            step = hooks.pop(len(live), 1)
            for j, r in enumerate(live.tolist()):
                row_routes[r].append(step[j])
        logits = out.logits[:, -1].float()
        next_pos = next_pos + 1
    if hooks is not None:
        routes_out.extend(np.concatenate(parts) for parts in row_routes)
    return responses, [np.asarray(v, dtype=np.float32) for v in logps], reasons
