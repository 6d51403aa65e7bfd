"""Engine ``native`` for the torch backend: a transformers causal LM sampled by
:func:`mindrl.rollout.torch_decode.decode`.

All prompts x n samples go through one batched decode loop (left-padded, KV cache on): each
prompt is prefilled once for its group and rows that stopped leave the batch, so a step costs
what its live rows cost (``generate_hf`` is the same through one transformers ``generate`` call,
the reference of the tests and ``bench/rollout.py``). Temperature and top-k / min-p / top-p are
applied in the order of :mod:`algorithms.truncation` (vLLM's), and the token is drawn from the
softmax of the result. The log-prob reported for a sampled token is under that distribution (no
extra forward pass): what the trainer scores with the same masks, so the rollout-vs-trainer gap
stays ~1e-6 whatever the truncation.

Seeding (inside a forked torch RNG, so the trainer's RNG is untouched): a call with
``sampling.seed`` set draws exactly from that seed (same seed, same prompts -> same samples;
the trainer passes a per-step seed, which makes resume exact); with ``seed=None`` each call
draws from ``1_000_003 * call_index``, and ``state_dict()`` carries the call index.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

import numpy as np

from algorithms.truncation import Truncation
from mindrl.rollout.base import ENGINES
from mindrl.types import Rollouts, SamplingParams


def stop_ids(tokenizer, generation_config=None, extra=()) -> List[int]:
    """EOS ids of the model (generation config and tokenizer) plus ``extra``, deduplicated."""
    ids: List[int] = []
    eos = getattr(generation_config, "eos_token_id", None) if generation_config else None
    for e in ([eos] if isinstance(eos, int) else list(eos or [])) + \
            [getattr(tokenizer, "eos_token_id", None)] + list(extra):
        if e is not None and int(e) not in ids:
            ids.append(int(e))
    return ids


class Truncate:
    """A transformers logits processor: scores / temperature, then the rollout's top-k / min-p /
    top-p masks (:func:`mindrl.backends.torch.truncation.truncated_logits`)."""

    def __init__(self, temperature: float, trunc):
        self.temperature, self.trunc = temperature, trunc

    def __call__(self, input_ids, scores):
        from mindrl.backends.torch.truncation import truncated_logits

        return truncated_logits(scores.float() / self.temperature, self.trunc)


class _RowHook:
    """``model.mindrl_logits_hook`` (see :mod:`mindrl.rollout.torch_decode`) as a transformers
    logits processor: every row of the call is live, its id is its batch index."""

    def __init__(self, step, prompt_len: int):
        self.step, self.P = step, prompt_len

    def __call__(self, input_ids, scores):
        import torch

        return self.step(torch.arange(scores.shape[0]), input_ids.shape[1] - self.P, scores)


# transformers fills unset (None) generation options from the model's generation_config:
# these values switch every sampling warper and penalty off explicitly
_NEUTRAL = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=None, typical_p=1.0,
                epsilon_cutoff=0.0, eta_cutoff=0.0, repetition_penalty=1.0,
                no_repeat_ngram_size=0, encoder_repetition_penalty=1.0)


class NativeTorchEngine:
    """Samples with a transformers causal LM. ``shared=True``: the model is the trainer's own
    policy, so :meth:`load_weights` has nothing to do (and does not consume its iterator)."""

    name = "native"
    takes_tensors = True       # load_weights accepts torch tensors

    def __init__(self, model, tokenizer, *, device=None, shared: bool = False,
                 packed_weights: bool = True):
        self.model = model
        self.packed_weights = packed_weights      # rollout.native_packed_weights (CPU decode)
        self.tokenizer = tokenizer
        self.device = device if device is not None else next(model.parameters()).device
        self.shared = shared
        self.calls = 0
        self.record_routes = False     # MoE: return each row's expert choices (routing replay)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else tokenizer.eos_token_id)

    @classmethod
    def from_config(cls, cfg, model_path: Optional[str] = None) -> "NativeTorchEngine":
        """A standalone engine with its own copy of the model (for eval / data tools)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from mindrl.models.tiny import check_model_dir, resolve_model_path
        from mindrl.torch_device import DTYPES, torch_device

        path = resolve_model_path(model_path or cfg.model.path)
        check_model_dir(path)
        torch.set_num_threads(max(1, cfg.train.threads))
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True,
                                            trust_remote_code=cfg.model.trust_remote_code)
        device = torch_device(cfg)
        model = AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, dtype=DTYPES[cfg.model.dtype],
            trust_remote_code=cfg.model.trust_remote_code).to(device).eval()
        return cls(model, tok, device=device,
                   packed_weights=cfg.rollout.native_packed_weights)

    # ------------------------------------------------------------------ generate
    def generate(self, prompt_ids: List[List[int]], sampling: SamplingParams,
                 on_group_done=None, interrupt=None, done_tokens=None) -> Rollouts:
        """All prompts x ``sampling.n`` samples through :func:`mindrl.rollout.torch_decode.decode`
        (one prefill per prompt, finished rows leave the batch). ``on_group_done(group,
        responses)``, when given, is called during generation for each group whose samples have
        all stopped. ``interrupt`` / ``done_tokens``: partial rollouts (a generation stopped
        at a weight update), see :func:`mindrl.rollout.torch_decode.decode`."""
        return self._sample(prompt_ids, sampling, on_group_done, hf=False, interrupt=interrupt,
                            done_tokens=done_tokens)

    def generate_hf(self, prompt_ids: List[List[int]], sampling: SamplingParams,
                    on_group_done=None) -> Rollouts:
        """The same samples through one transformers ``generate`` call (every row decodes to the
        longest; n prefills per prompt): the reference the benchmark and tests compare with."""
        return self._sample(prompt_ids, sampling, on_group_done, hf=True)

    def _sample(self, prompt_ids, sampling, on_group_done, hf: bool, interrupt=None,
                done_tokens=None) -> Rollouts:
        import torch

        n, B0 = sampling.n, len(prompt_ids)
        rows = [p for p in prompt_ids for _ in range(n)]           # prompt-major
        greedy = sampling.temperature <= 0
        eos = stop_ids(self.tokenizer, getattr(self.model, "generation_config", None),
                       sampling.stop_token_ids)
        trunc = None if greedy else Truncation(sampling.top_k, sampling.top_p, sampling.min_p)
        trunc = trunc if trunc is not None and trunc.active else None
        was_training = self.model.training
        self.model.eval()
        routes = None
        try:
            on_cpu = self.device.type == "cpu"
            with torch.random.fork_rng(devices=[] if on_cpu else [self.device.index or 0],
                                       device_type="cuda" if on_cpu else self.device.type), \
                    torch.no_grad():
                seed = 1_000_003 * self.calls if sampling.seed is None else int(sampling.seed)
                torch.manual_seed(seed % (2 ** 63))
                if hf:
                    responses, logps, reasons = self._hf_generate(
                        rows, n, sampling, eos, trunc, on_group_done)
                else:
                    from mindrl.rollout.torch_decode import decode

                    routes = [] if self.record_routes else None
                    responses, logps, reasons = decode(
                        self.model, prompt_ids, n, sampling.max_new_tokens, eos, self.pad_id,
                        sampling.temperature, trunc, device=self.device,
                        on_group_done=on_group_done, routes_out=routes, interrupt=interrupt,
                        done_tokens=done_tokens, packed_weights=self.packed_weights)
        finally:
            self.model.train(was_training)
        self.calls += 1
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Rollouts(prompt_ids=[list(p) for p in rows], response_ids=responses,
                        logprobs=logps, finish_reasons=reasons,
                        group_index=np.repeat(np.arange(B0), n), texts=texts,
                        routed_experts=routes if not hf and routes else [])

    def _hf_generate(self, rows, n, sampling, eos, trunc, on_group_done):
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        P = max(len(p) for p in rows)
        ids = torch.full((len(rows), P), self.pad_id, dtype=torch.long)
        att = torch.zeros((len(rows), P), dtype=torch.long)
        for i, p in enumerate(rows):                                # left-pad
            ids[i, P - len(p):] = torch.tensor(p, dtype=torch.long)
            att[i, P - len(p):] = 1
        greedy = sampling.temperature <= 0
        gen = GenerationConfig(
            do_sample=not greedy, **_NEUTRAL,
            max_new_tokens=sampling.max_new_tokens, eos_token_id=eos, pad_token_id=self.pad_id,
            bos_token_id=None, use_cache=True, return_dict_in_generate=True,
            output_scores=True, num_return_sequences=1)
        procs = [Truncate(sampling.temperature if not greedy else 1.0, trunc)]
        hook = getattr(self.model, "mindrl_logits_hook", None)
        if hook is not None:                  # the decode loop's hook, on the raw logits
            procs.insert(0, _RowHook(hook(len(rows)), P))
        if on_group_done is not None:
            from mindrl.rollout.finished import GroupWatcher

            procs.append(GroupWatcher(P, n, eos, on_group_done))
        out = self.model.generate(input_ids=ids.to(self.device),
                                  attention_mask=att.to(self.device), generation_config=gen,
                                  logits_processor=LogitsProcessorList(procs))
        seqs = out.sequences[:, P:]                                  # (B, L)
        scores = torch.stack(out.scores, dim=1).float()              # (B, L, V) processed
        logp = torch.log_softmax(scores, dim=-1)
        logp = torch.gather(logp, -1, seqs.unsqueeze(-1)).squeeze(-1).cpu().numpy()
        seqs = seqs.cpu().numpy()
        eos_set = set(eos)
        responses, logps, reasons = [], [], []
        for i in range(len(rows)):
            row = seqs[i].tolist()
            end = next((t + 1 for t, tok in enumerate(row) if tok in eos_set), None)
            if end is None:
                end, reason = min(len(row), sampling.max_new_tokens), "length"
            else:
                reason = "stop"
            responses.append(row[:end])
            logps.append(logp[i, :end].astype(np.float32))
            reasons.append(reason)
        return responses, logps, reasons

    # ------------------------------------------------------------------ weights / state
    def load_weights(self, named_weights: Iterable[Tuple[str, np.ndarray]]) -> None:
        if self.shared:
            return                       # same module as the trainer's policy
        import torch

        params = self.model.state_dict()
        with torch.no_grad():
            for name, arr in named_weights:
                t = params[name]
                src = arr if isinstance(arr, torch.Tensor) else torch.as_tensor(np.asarray(arr))
                t.copy_(src.to(device=t.device, dtype=t.dtype))

    def state_dict(self) -> dict:
        return {"calls": self.calls}

    def load_state_dict(self, state: dict) -> None:
        self.calls = int(state["calls"])

    def close(self) -> None:
        self.model = None


@ENGINES.register("native")
def make_native_engine(cfg, *, backend=None, model_path: Optional[str] = None):
    """Engine factory: a sampler over the torch backend's policy (``backend.sampling_model()``),
    another backend's own sampler (``backend.native_engine()``), or a standalone torch model
    when no backend is given."""
    if backend is not None:
        sampling_model = getattr(backend, "sampling_model", None)
        if sampling_model is None:
            return backend.native_engine()
        model, shared = sampling_model()
        packed = cfg.rollout.native_packed_weights if cfg is not None else True
        return NativeTorchEngine(model, backend.tokenizer, device=backend.device, shared=shared,
                                 packed_weights=packed)
    return NativeTorchEngine.from_config(cfg, model_path)
