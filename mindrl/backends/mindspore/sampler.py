"""A native MindSpore sampler (RolloutEngine protocol) with a static KV cache.

Shapes are static so a run compiles each function once per bucket: rows are padded to a power
of two, prompts (left-padded) to a prompt bucket, and the cache holds prompt bucket + response
bucket slots. Prefill writes the prompt's keys/values into the first P slots; each decode step
writes one slot through a 0/1 placement matrix (``model.forward_with_cache``), so the decode
graph never changes shape.

Sampling runs on the host in NumPy from the graph's float32 log-softmax of logits / temperature:
top_k, then min_p (keep p >= min_p * max p), then top_p (the smallest set whose mass reaches
top_p), renormalised. The log-prob reported for a sampled token is the UNFILTERED
log-softmax(logits / temperature) -- the quantity the trainer recomputes -- so rollout and
trainer log-probs agree up to float error (tested to 1e-4). Temperature 0 is greedy and reports
log-probs at temperature 1.
"""

from __future__ import annotations

import time
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.types import Rollouts, SamplingParams, bucket


def _pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def filter_probs(probs: np.ndarray, top_k: int = -1, top_p: float = 1.0,
                 min_p: float = 0.0) -> np.ndarray:
    """(B, V) probabilities -> filtered and renormalised (B, V) (float64)."""
    p = probs.astype(np.float64)
    V = p.shape[-1]
    if top_k is not None and 0 < top_k < V:
        kth = -np.partition(-p, top_k - 1, axis=-1)[:, top_k - 1:top_k]
        p = np.where(p >= kth, p, 0.0)
    if min_p and min_p > 0:
        p = np.where(p >= min_p * p.max(-1, keepdims=True), p, 0.0)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-p, axis=-1)
        sorted_p = np.take_along_axis(p, order, -1)
        csum = np.cumsum(sorted_p, -1) / sorted_p.sum(-1, keepdims=True)
        keep_sorted = (csum - sorted_p / sorted_p.sum(-1, keepdims=True)) < top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, -1)
        p = np.where(keep, p, 0.0)
    return p / p.sum(-1, keepdims=True)


class MindSporeSampler:
    """Samples from a :class:`Qwen2ForCausalLM` (shared with the trainer: no weight copy)."""

    def __init__(self, model, tokenizer=None, pad_id: int = 0, eos_ids: Sequence[int] = (),
                 prompt_buckets: Sequence[int] = (16, 32, 64, 128, 256, 512),
                 response_buckets: Sequence[int] = (16, 32, 64, 128, 256, 512, 1024),
                 seed: int = 0):
        self.model = model
        self.tokenizer = tokenizer
        self.pad_id = int(pad_id)
        self.eos_ids = tuple(int(e) for e in eos_ids)
        self.prompt_buckets = sorted(prompt_buckets)
        self.response_buckets = sorted(response_buckets)
        self._rng = np.random.default_rng(seed)
        self.compile_counts: Dict[str, int] = {}
        self._seen: Dict[str, set] = {}
        self.last_stats: Dict[str, float] = {}
        spec = model.spec
        self._cache_shape = (spec.num_key_value_heads, spec.head_dim)
        self._layers = spec.num_hidden_layers

        def step(ids, pos, key_mask, q_slots, write, k_caches, v_caches, inv_temp):
            logits, k_new, v_new = model.forward_with_cache(ids, pos, key_mask, q_slots, write,
                                                            k_caches, v_caches)
            return ops.log_softmax(logits * inv_temp, -1), k_new, v_new

        self._prefill = ms.jit(step)
        self._decode = ms.jit(step)

    # --- protocol ----------------------------------------------------------------------------
    def load_weights(self, named_weights: Iterable[Tuple[str, np.ndarray]]) -> None:
        from mindrl.backends.mindspore.weights import load_into

        load_into(self.model, named_weights, strict=False)

    def close(self) -> None:
        pass

    def rng_state(self) -> dict:
        return self._rng.bit_generator.state

    def set_rng_state(self, state: dict) -> None:
        self._rng.bit_generator.state = state

    def _note(self, name: str, key) -> None:
        seen = self._seen.setdefault(name, set())
        seen.add(key)
        self.compile_counts[name] = len(seen)

    def generate(self, prompt_ids: List[List[int]], sampling: SamplingParams) -> Rollouts:
        sp = sampling
        rng = np.random.default_rng(sp.seed) if sp.seed is not None else self._rng
        rows = [list(p) for p in prompt_ids for _ in range(sp.n)]
        B = len(rows)
        Bp = _pow2(B)
        P = bucket(max(len(r) for r in rows), self.prompt_buckets)
        Tmax = int(sp.max_new_tokens)
        S = P + bucket(Tmax, self.response_buckets)
        ids = np.full((Bp, P), self.pad_id, np.int32)
        key_mask = np.zeros((Bp, S), np.float32)
        plen = np.zeros(Bp, np.int32)
        for i, r in enumerate(rows):
            ids[i, P - len(r):] = r
            key_mask[i, P - len(r):P] = 1.0
            plen[i] = len(r)
        key_mask[B:, P - 1] = 1.0          # padding rows attend to one slot: no empty softmax
        pos = np.clip(np.cumsum(key_mask[:, :P], 1) - 1, 0, None).astype(np.int32)
        Nk, D = self._cache_shape
        zeros = Tensor(np.zeros((Bp, Nk, S, D), np.float32), self.model.compute_dtype)
        # mutable: a plain tuple input is a compile-time constant (one compile per call)
        k_caches = ms.mutable(tuple(zeros for _ in range(self._layers)))
        v_caches = ms.mutable(tuple(zeros for _ in range(self._layers)))
        write = np.zeros((1, 1, S, P), np.float32)
        write[0, 0, np.arange(P), np.arange(P)] = 1.0
        greedy = sp.temperature <= 0
        inv_temp = Tensor(np.float32(1.0 if greedy else 1.0 / sp.temperature))
        stop = set(self.eos_ids) | set(int(t) for t in sp.stop_token_ids)

        t0 = time.perf_counter()
        self._note("prefill", (Bp, P, S))
        logp, k_caches, v_caches = self._prefill(
            Tensor(ids), Tensor(pos), Tensor(key_mask), Tensor(np.arange(P, dtype=np.int32)),
            Tensor(write), k_caches, v_caches, inv_temp)
        k_caches, v_caches = ms.mutable(k_caches), ms.mutable(v_caches)
        out_tokens = [[] for _ in range(B)]
        out_logp = [[] for _ in range(B)]
        finished = np.zeros(B, bool)
        reasons = ["length"] * B
        onehot = np.zeros((1, 1, S, 1), np.float32)
        steps = 0
        for t in range(Tmax):
            lp = logp.asnumpy()[:B].astype(np.float64)                          # (B, V)
            if greedy:
                tok = lp.argmax(-1)
            else:
                probs = filter_probs(np.exp(lp), sp.top_k, sp.top_p, sp.min_p)
                u = rng.random((B, 1))
                tok = np.minimum((probs.cumsum(-1) < u).sum(-1), probs.shape[-1] - 1)
            for i in np.nonzero(~finished)[0]:
                out_tokens[i].append(int(tok[i]))
                out_logp[i].append(float(lp[i, tok[i]]))
                if int(tok[i]) in stop:
                    finished[i] = True
                    reasons[i] = "stop"
            steps += 1
            if finished.all() or t == Tmax - 1:
                break
            slot = P + t
            step_ids = np.full((Bp, 1), self.pad_id, np.int32)
            step_ids[:B, 0] = tok
            key_mask[:, slot] = 1.0
            onehot[:] = 0.0
            onehot[0, 0, slot, 0] = 1.0
            step_pos = (plen + t).reshape(Bp, 1).astype(np.int32)
            self._note("decode", (Bp, S))
            logp, k_caches, v_caches = self._decode(
                Tensor(step_ids), Tensor(step_pos), Tensor(key_mask),
                Tensor(np.array([slot], np.int32)), Tensor(onehot), ms.mutable(k_caches),
                ms.mutable(v_caches), inv_temp)
        elapsed = time.perf_counter() - t0
        n_tok = sum(len(r) for r in out_tokens)
        self.last_stats = {"tokens": float(n_tok), "seconds": elapsed, "decode_steps": steps,
                           "tokens_per_s": n_tok / max(elapsed, 1e-9)}
        texts = []
        if self.tokenizer is not None:
            texts = [self.tokenizer.decode(r, skip_special_tokens=True) for r in out_tokens]
        return Rollouts(prompt_ids=rows, response_ids=out_tokens,
                        logprobs=[np.asarray(x, np.float32) for x in out_logp],
                        finish_reasons=reasons,
                        group_index=np.repeat(np.arange(len(prompt_ids)), sp.n), texts=texts)
