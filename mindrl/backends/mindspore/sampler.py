"""A native MindSpore sampler (RolloutEngine protocol) with a static KV cache updated in place.

Shapes are static so a run compiles each function once per bucket: rows are padded to a power
of two, prompts (left-padded) to a prompt bucket, and the cache holds prompt bucket + response
bucket slots. The cache of each (rows, slots) bucket is a set of Parameters that live with the
sampler: prefill writes the prompt's keys/values into them (``ops.assign``), and each decode step
scatters one slot per row in place (``ops.scatter_nd_update``), so a step neither copies nor
returns the cache.

A group's n samples share one prefill: the distinct prompts run through a bucket of their own
row count and their cache rows are gathered n times into the decode bucket
(``share_prefill``). Rows that stopped leave the batch: once the live rows are at most half of
a bucket of more than 4 rows, they are gathered into the smallest power-of-two bucket holding
them, 4 rows at the least (``compact``), which compiles one decode graph per bucket size
used. Each row draws its own uniform at every step, so neither changes a sample.

The cache grows with the response (``grow_from``): it starts at the prompt bucket plus the
response bucket holding the first 64 tokens, and when a position crosses its end the rows'
cache is copied into the next response bucket's (its later slots masked until written), so a
decode step reads slots in proportion to the response so far, not to ``max_new_tokens``; one
decode graph per (rows, slots) bucket used, the response buckets being powers of two. The
slots past the written ones get exactly zero attention weight, so the sampled tokens are the
full-size cache's (tested).

A decode step is one small graph (:meth:`MindSporeSampler._decode_fn`): one token per row, 2-D
activations, RoPE tables and the additive attention mask built on the host (a few hundred
floats), no log-softmax in the graph. On CPU every kernel costs framework time (~7-10 us), so
the step is written with as few kernels as the math allows; with at most 100 kernels MindSpore
runs the graph synchronously in the calling thread (its single-thread actor mode), without the
actor/kernel thread hand-offs that each wait a scheduler slice on a busy machine.

Sampling runs on the host in NumPy from the graph's float32 logits (:mod:`.draw`): each row
draws by inverse CDF from one uniform, the cumulative sums in two levels (blocks of ids, then
the ids of one block), so a draw costs a few passes over the logits and no full-vocabulary
cumulative sum. Without truncation it draws from softmax(logits / temperature) directly
(float32 weights, float64 sums). With truncation it takes log-softmax(logits / temperature) in
float64, then top_k, then min_p (keep p >= min_p * max p), then top_p (the smallest set whose
mass reaches top_p), renormalised (:mod:`algorithms.truncation`'s masks).
The log-prob reported for a sampled token is under that filtered distribution, the one it was
drawn from -- the quantity the trainer recomputes with the same masks -- so rollout and trainer
log-probs agree up to float error (tested to 1e-4). Temperature 0 is greedy and reports
log-probs at temperature 1.
"""

from __future__ import annotations

import gc
import time
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, ops

from mindrl.backends.mindspore.buckets import cache_growth
from mindrl.backends.mindspore.draw import (  # noqa: F401  (sampler.filter_probs, ...)
    draw, filter_probs, greedy as draw_greedy, inverse_cdf, log_softmax64)
from mindrl.backends.mindspore.kernels import NEG_INF, PORTABLE
from mindrl.backends.mindspore.model import Linear

from mindrl.types import Rollouts, SamplingParams, bucket


def _pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _rotate_half_matrix(d: int) -> np.ndarray:
    """(d, d) signed permutation R with x @ R == concat(-x[d/2:], x[:d/2]) exactly (one +-1
    per column, so the products are exact): RoPE's rotate-half as one MatMul kernel instead of
    split + neg + concat."""
    h = d // 2
    r = np.zeros((d, d), np.float32)
    r[np.arange(h) + h, np.arange(h)] = -1.0
    r[np.arange(h), np.arange(h) + h] = 1.0
    return r


def _dense_linears(model):
    """The Linear-like cells a decode step runs: each layer's attention projections and,
    for a dense layer, its MLP's."""
    for layer in model.model.layers:
        a = layer.self_attn
        yield from (a.q_proj, a.k_proj, a.v_proj, a.o_proj)
        if not layer.is_moe:
            yield from (layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)


class _BucketCache:
    """The KV cache of one (rows, slots) bucket as Parameters, and the graphs that use it."""

    def __init__(self, rows: int, slots: int, layers: int, kv_heads: int, head_dim: int, dtype):
        def buf(kind, i):
            return Parameter(Tensor(np.zeros((rows, kv_heads, slots, head_dim), np.float32),
                                    dtype), name=f"sampler_cache.{kind}{i}.{rows}x{slots}",
                             requires_grad=False)

        self.k = tuple(buf("k", i) for i in range(layers))
        self.v = tuple(buf("v", i) for i in range(layers))
        self.prefill: Dict[object, object] = {}   # prompt bucket (, "routes") -> jitted prefill
        self.decode = None
        self.decode_routes = None                 # the decode graph that also returns routes


class MindSporeSampler:
    """Samples from a :class:`Qwen2ForCausalLM` (shared with the trainer: no weight copy).

    The KV cache of each (rows, slots) bucket stays allocated between calls (its graphs are
    compiled against it): memory = 2 x layers x rows x kv heads x slots x head_dim floats per
    bucket used.
    """

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
        self._k = spec.num_experts_per_tok
        self._inv_freq = model.inv_freq.asnumpy().reshape(-1).astype(np.float32)   # (D/2,)
        self._rope_scaling = np.float32(model.rope_scaling)      # YaRN's factor on cos/sin
        self._buckets: Dict[Tuple[int, int], _BucketCache] = {}
        self.share_prefill = True       # one prefill per group, its cache rows repeated n times
        self.compact = True             # finished rows leave the decode batch (smaller bucket)
        # the cache grows with the response: prompt bucket + the response bucket holding this
        # many tokens first, then the next response bucket each time a position crosses the
        # cache's end (the cache copied over), so a step reads slots in proportion to the
        # length so far, not the call's maximum; 0 = the full bucket from the start
        self.grow_from = 64
        # each cache size used stays allocated (its compiled decode graphs write into it), so
        # growing holds up to about twice the full cache's keys and values; a call whose full
        # cache is larger than this (bytes) starts at the full size instead
        self.grow_max_bytes = 256 << 20
        # MoE: return each row's expert choices (routing replay; Rollouts.routed_experts)
        self.record_routes = False
        # portable kernels: decode buckets of at least this many rows compute the LM head and
        # the plain linear layers as (W h^T)^T, the weight's rows on the product's rows (equal
        # up to float rounding): MindSpore's CPU MatMul runs h W^T at 8-32 rows far below the
        # memory bound (bench/ms_decode_step.py; at 4 rows the plain product is faster)
        self.transposed_rows = 8

    # --- graphs -------------------------------------------------------------------------------
    def _bucket(self, rows: int, slots: int) -> _BucketCache:
        key = (rows, slots)
        if key not in self._buckets:
            Nk, D = self._cache_shape
            self._buckets[key] = _BucketCache(rows, slots, self._layers, Nk, D,
                                              self.model.compute_dtype)
        return self._buckets[key]

    def _prefill_fn(self, cache: _BucketCache, routes: bool = False):
        """Prompt pass: writes the prompt's keys/values into the bucket's cache Parameters and
        returns the float32 logits (B, V) of the last prompt position (``routes``: and the
        experts of every prompt token, (MoE layers, B*P, k))."""
        model, ks, vs, n = self.model, cache.k, cache.v, self._layers

        def prefill(ids, pos, key_mask, q_slots, write):
            logits, k_new, v_new = model.forward_with_cache(ids, pos, key_mask, q_slots, write,
                                                            ks, vs)
            for i in range(n):
                ops.assign(ks[i], k_new[i])
                ops.assign(vs[i], v_new[i])
            return logits

        def prefill_routes(ids, pos, key_mask, q_slots, write):
            logits, k_new, v_new, used = model.forward_with_cache(
                ids, pos, key_mask, q_slots, write, ks, vs, True)
            for i in range(n):
                ops.assign(ks[i], k_new[i])
                ops.assign(vs[i], v_new[i])
            return logits, used

        return ms.jit(prefill_routes if routes else prefill)

    def _decode_fn(self, cache: _BucketCache, routes: bool = False):
        """One token per row -> float32 logits (B, V). Inputs: ids (B,) int32; cos_q/sin_q
        (B, Nq*D) and cos_k/sin_k (B, Nk*D), the RoPE tables of each row's position tiled over
        the heads (the query's pre-multiplied by 1/sqrt(D), which RoPE's linearity allows);
        bias (B, 1, 1, S) additive mask (0 = a written, real slot); idx (B, Nk, 3) int32
        [row, kv head, slot] where the new key/value goes.

        Portable kernels: activations stay 2-D (B, heads*D) up to attention, rotate-half is
        one MatMul with a block-diagonal signed permutation (exact; costs at most one extra
        q-sized projection), grouped-query attention is two BatchMatMuls on the cache, and
        a bucket of ``transposed_rows`` rows or more computes the head and the plain linear
        layers (every one a :class:`Linear`, no adapter) as (W h^T)^T.
        Fused (Ascend) kernels get the same math through ``model.kernels`` in BNSD layout.
        ``routes``: also returns the experts each MoE layer chose, (MoE layers, B, k)."""
        model, ks, vs = self.model, cache.k, cache.v
        spec = model.spec
        Nq, Nk, D = spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim
        rep = Nq // Nk
        kernels = model.kernels
        dt = model.compute_dtype
        rot_q = Tensor(np.kron(np.eye(Nq, dtype=np.float32), _rotate_half_matrix(D)), dt)
        rot_k = Tensor(np.kron(np.eye(Nk, dtype=np.float32), _rotate_half_matrix(D)), dt)
        rot_q_t = Tensor(np.ascontiguousarray(rot_q.asnumpy().T), dt)
        rot_k_t = Tensor(np.ascontiguousarray(rot_k.asnumpy().T), dt)
        mm = ops.MatMul()
        mm_t = ops.MatMul(transpose_b=True)
        bmm_t = ops.BatchMatMul(transpose_b=True)
        bmm = ops.BatchMatMul()
        # (W h^T)^T products: the head always in such a bucket, the body when every linear
        # layer it uses is a plain Linear (no LoRA adapter)
        head_t = kernels is PORTABLE and cache.k[0].shape[0] >= self.transposed_rows
        body_t = head_t and all(type(c) is Linear for c in _dense_linears(model))
        w_head = model.model.embed_tokens.weight if model.tied else model.lm_head.weight

        def lin(cell, h):
            """cell(h) for a Linear cell and h (B, in); (W h^T)^T when ``body_t``."""
            if body_t:
                y = ops.transpose(mm_t(cell.weight, h), (1, 0))
                if cell.has_bias:
                    y = y + cell.bias
                return y
            return cell(h)

        def rotate(x, r, r_t):
            """x @ r (exact: r is a signed permutation)."""
            if body_t:
                return ops.transpose(mm_t(r_t, x), (1, 0))
            return mm(x, r)

        def mlp_step(layer, x, used):
            """The layer's MLP half; a MoE layer adds the experts it chose to ``used``."""
            if routes and layer.is_moe:
                y, r = layer.mlp.routed(layer.post_attention_layernorm(x))
                return x + y, used + (r,)
            if body_t and not layer.is_moe:
                m = layer.mlp
                h = layer.post_attention_layernorm(x)
                return x + lin(m.down_proj, m.act(lin(m.gate_proj, h), lin(m.up_proj, h))), used
            return x + layer.mlp(layer.post_attention_layernorm(x)), used

        def finish(x, B, used):
            h = model.model.norm(x)                                            # (B, H)
            if head_t:      # (W h^T)^T: the vocabulary on the product's rows
                logits = ops.transpose(mm_t(w_head, h), (1, 0)).astype(ms.float32)
            else:
                logits = model.head(h.reshape(B, 1, -1)).reshape(B, -1)
            if routes:
                return logits, ops.stack(used, 0)
            return logits

        def portable(ids, cos_q, sin_q, cos_k, sin_k, bias, idx):
            B = ids.shape[0]
            x = model.model.embed_tokens(ids)                                  # (B, H)
            used = ()
            i = 0
            for layer in model.model.layers:
                attn = layer.self_attn
                h = layer.input_layernorm(x)
                q = lin(attn.q_proj, h)                                        # (B, Nq*D)
                k = lin(attn.k_proj, h)
                if attn.qk_norm:                                               # per head (Qwen3)
                    q = attn.q_norm(q.reshape(B, Nq, D)).reshape(B, Nq * D)
                    k = attn.k_norm(k.reshape(B, Nk, D)).reshape(B, Nk * D)
                q = q * cos_q + rotate(q, rot_q, rot_q_t) * sin_q              # scaled by 1/sqrt(D)
                k = k * cos_k + rotate(k, rot_k, rot_k_t) * sin_k
                kc = ops.scatter_nd_update(ks[i], idx, k.reshape(B, Nk, D))
                vc = ops.scatter_nd_update(vs[i], idx, lin(attn.v_proj, h).reshape(B, Nk, D))
                scores = bmm_t(q.reshape(B, Nk, rep, D), kc) + bias           # (B, Nk, rep, S)
                o = bmm(ops.softmax(scores, -1), vc)                           # (B, Nk, rep, D)
                x = x + lin(attn.o_proj, o.reshape(B, Nq * D))
                x, used = mlp_step(layer, x, used)
                i = i + 1
            return finish(x, B, used)

        def fused(ids, cos_q, sin_q, cos_k, sin_k, bias, idx):
            B = ids.shape[0]
            cos = cos_k[:, :D].reshape(B, 1, 1, D)
            sin = sin_k[:, :D].reshape(B, 1, 1, D)
            x = model.model.embed_tokens(ids)
            used = ()
            i = 0
            for layer in model.model.layers:
                attn = layer.self_attn
                h = layer.input_layernorm(x)
                q = attn.q_proj(h).reshape(B, Nq, 1, D)
                k = attn.k_proj(h).reshape(B, Nk, 1, D)
                if attn.qk_norm:
                    q, k = attn.q_norm(q), attn.k_norm(k)
                q, k = kernels.rope(q, k, cos, sin)
                kc = ops.scatter_nd_update(ks[i], idx, k.reshape(B, Nk, D))
                vc = ops.scatter_nd_update(vs[i], idx, attn.v_proj(h).reshape(B, Nk, D))
                o = kernels.attention(q, kc, vc, bias, attn.scale)
                x = x + attn.o_proj(o.reshape(B, Nq * D))
                x, used = mlp_step(layer, x, used)
                i = i + 1
            return finish(x, B, used)

        return ms.jit(portable if kernels is PORTABLE else fused)

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

    def generate(self, prompt_ids: List[List[int]], sampling: SamplingParams,
                 on_group_done=None, interrupt=None) -> Rollouts:
        """``on_group_done(group, responses)``, when given, is called from the decode loop for
        each group whose samples have all stopped (responses: the group's token ids, stop token
        included), while the other groups go on decoding (``reward.overlap_groups``).
        ``interrupt`` (partial rollouts): called after each decode step; when it returns True the
        rows still decoding end there with reason ``"interrupted"``, tokens and log-probs kept."""
        # The decode loop allocates a few small objects per token and step; the cyclic GC they
        # trigger was ~4% of a step's CPU (perf) and they hold no cycles: pause it meanwhile.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._generate(prompt_ids, sampling, on_group_done, interrupt)
        finally:
            if enabled:
                gc.enable()

    def _move(self, src: _BucketCache, dst: _BucketCache, rows: np.ndarray) -> None:
        """dst's cache rows := src's cache rows ``rows`` (len = dst's rows), every layer."""
        sel = Tensor(rows.astype(np.int32))
        for i in range(self._layers):
            ops.assign(dst.k[i], ops.gather(src.k[i], sel, 0))
            ops.assign(dst.v[i], ops.gather(src.v[i], sel, 0))

    def _grow(self, src: _BucketCache, dst: _BucketCache) -> None:
        """dst's first slots := src's cache (same rows, more slots), every layer; dst's slots
        after them are zeroed (the mask hides them until a step writes them)."""
        rows, nk, s0, d = src.k[0].shape
        tail = Tensor(np.zeros((rows, nk, dst.k[0].shape[2] - s0, d), np.float32),
                      src.k[0].dtype)
        for i in range(self._layers):
            ops.assign(dst.k[i], ops.concat((src.k[i], tail), 2))
            ops.assign(dst.v[i], ops.concat((src.v[i], tail), 2))

    def _ready(self, rows: int, slots: int, prompt_bucket=None) -> _BucketCache:
        cache = self._bucket(rows, slots)
        rec = self._recording()
        key = (prompt_bucket, "routes") if rec else prompt_bucket
        if prompt_bucket is not None and key not in cache.prefill:
            cache.prefill[key] = self._prefill_fn(cache, rec)
        if prompt_bucket is None and rec and cache.decode_routes is None:
            cache.decode_routes = self._decode_fn(cache, True)
        if prompt_bucket is None and not rec and cache.decode is None:
            cache.decode = self._decode_fn(cache)
        return cache

    def _generate(self, prompt_ids: List[List[int]], sampling: SamplingParams,
                  on_group_done=None, interrupt=None) -> Rollouts:
        sp = sampling
        rng = np.random.default_rng(sp.seed) if sp.seed is not None else self._rng
        rows = [list(p) for p in prompt_ids for _ in range(sp.n)]
        B, B0 = len(rows), len(prompt_ids)
        Bp = _pow2(B)
        P = bucket(max(len(r) for r in rows), self.prompt_buckets)
        Tmax = int(sp.max_new_tokens)
        sizes = cache_growth(P, Tmax, self.response_buckets, self.grow_from)
        Nk, D = self._cache_shape
        item = 2 if self.model.compute_dtype in (ms.bfloat16, ms.float16) else 4
        if 2 * self._layers * Bp * sizes[-1] * Nk * D * item > self.grow_max_bytes:
            sizes = sizes[-1:]          # the full cache from the start (memory, see above)
        S = sizes.pop(0)                # the cache's slots now; ``sizes``: the ones to grow to
        if self.model.rope_max_len and P + Tmax > self.model.rope_max_len:
            raise ValueError(f"prompt bucket {P} + max_new_tokens {Tmax} exceeds "
                             f"max_position_embeddings={self.model.rope_max_len}: dynamic NTK "
                             "RoPE scaling beyond it is not implemented by the MindSpore backend")
        # one prefill per group: the B0 distinct prompts, then their cache rows repeated n times
        share = self.share_prefill and sp.n > 1
        Bq = _pow2(B0) if share else Bp
        src = [list(p) for p in prompt_ids] if share else rows
        ids = np.full((Bq, P), self.pad_id, np.int32)
        mask_q = np.zeros((Bq, S), np.float32)
        for i, r in enumerate(src):
            ids[i, P - len(r):] = r
            mask_q[i, P - len(r):P] = 1.0
        mask_q[len(src):, P - 1] = 1.0      # padding rows attend to one slot: no empty softmax
        pos = np.clip(np.cumsum(mask_q[:, :P], 1) - 1, 0, None).astype(np.int32)
        Nk, D = self._cache_shape
        Nq = self.model.spec.num_attention_heads
        scale = np.float32(1.0 / np.sqrt(D))
        write = np.zeros((1, 1, S, P), np.float32)
        write[0, 0, np.arange(P), np.arange(P)] = 1.0
        greedy = sp.temperature <= 0
        inv_temp = 1.0 if greedy else 1.0 / sp.temperature
        truncated = not greedy and (sp.top_k >= 1 or sp.top_p < 1.0 or sp.min_p > 0.0)
        stop = set(self.eos_ids) | set(int(t) for t in sp.stop_token_ids)

        t0 = time.perf_counter()
        rec = self._recording()
        pre = self._ready(Bq, S, P)
        self._note("prefill", (Bq, P, S))
        out = pre.prefill[(P, "routes") if rec else P](
            Tensor(ids), Tensor(pos), Tensor(mask_q), Tensor(np.arange(P, dtype=np.int32)),
            Tensor(write))
        logits = out[0] if rec else out
        routes: List[List[np.ndarray]] = []
        if rec:     # per rollout row: its prompt's routes, then one entry per decoded token
            pr = self._full_layers(out[1].asnumpy().reshape(-1, Bq, P, self._k))   # (Bq,P,L,k)
            routes = [[pr[(r // sp.n) if share else r, P - len(rows[r]):]] for r in range(B)]
        # rowmap[j]: the rollout row in cache row j of the current bucket (-1: padding)
        rowmap = np.full(Bp, -1, np.int64)
        rowmap[:B] = np.arange(B)
        cache = self._ready(Bp, S)
        logits_np, key_mask = logits.asnumpy(), mask_q
        if share:
            take = np.zeros(Bp, np.int64)
            take[:B] = np.arange(B) // sp.n
            self._move(pre, cache, take)
            logits_np, key_mask = logits_np[take], mask_q[take]
        plen = np.array([len(rows[r]) if r >= 0 else 1 for r in rowmap], np.int32)
        out_tokens = [[] for _ in range(B)]
        out_logp = [[] for _ in range(B)]
        finished = np.zeros(B, bool)
        reasons = ["length"] * B
        bias = ((1.0 - key_mask) * NEG_INF).astype(np.float32).reshape(-1, 1, 1, S)
        dtype = self.model.compute_dtype
        steps = 0
        open_groups = set(range(B0)) if on_group_done is not None else set()
        idx = None
        for t in range(Tmax):
            here = np.nonzero(rowmap >= 0)[0]                  # cache rows of unfinished rollouts
            live = rowmap[here]
            # the live rows' logits (B, V); no copy while every cache row is live
            rows_l = logits_np if len(here) == len(logits_np) else logits_np[here]
            # one uniform per rollout row and step, drawn for all B rows: a row's sample does
            # not depend on which rows were still decoding with it
            u = None if greedy else rng.random((B, 1))[live, 0]
            if greedy:
                tok, lp_tok = draw_greedy(rows_l)
            elif not truncated:
                tok, lp_tok = draw(rows_l, inv_temp, u)
            else:
                probs = filter_probs(np.exp(log_softmax64(rows_l, inv_temp)), sp.top_k,
                                     sp.top_p, sp.min_p)
                tok, _ = inverse_cdf(probs, u)
                lp_tok = np.log(probs[np.arange(len(tok)), tok])
            for j, r in enumerate(live):
                out_tokens[r].append(int(tok[j]))
                out_logp[r].append(float(lp_tok[j]))
                if int(tok[j]) in stop:
                    finished[r] = True
                    reasons[r] = "stop"
            steps += 1
            for g in sorted(open_groups):
                rows_g = range(g * sp.n, (g + 1) * sp.n)
                if finished[rows_g.start:rows_g.stop].all():
                    open_groups.discard(g)
                    on_group_done(g, [list(out_tokens[i]) for i in rows_g])
            if finished.all() or t == Tmax - 1:
                break
            if interrupt is not None and interrupt():
                for r in np.nonzero(~finished)[0]:
                    reasons[r] = "interrupted"
                break
            step_ids = np.full(len(rowmap), self.pad_id, np.int32)
            step_ids[here] = tok
            rowmap[here[finished[live]]] = -1
            n_live = int((rowmap >= 0).sum())
            if self.compact and len(rowmap) > 4 and n_live <= len(rowmap) // 2:
                # finished rows leave: the live ones move to the smallest bucket holding them
                keep = np.nonzero(rowmap >= 0)[0]
                Bn = max(4, _pow2(n_live))      # buckets of 4+ rows: fewer graphs to compile
                sel = np.concatenate([keep, np.full(Bn - n_live, keep[0])])
                nxt = self._ready(Bn, S)
                self._move(cache, nxt, sel)
                cache = nxt
                rowmap = np.concatenate([rowmap[keep], np.full(Bn - n_live, -1)])
                step_ids, plen, bias = step_ids[sel], plen[sel], bias[sel]
            Bc = len(rowmap)
            slot = P + t
            if slot >= S:               # the position crosses the cache's end: the next size
                S = sizes.pop(0)
                nxt = self._ready(Bc, S)
                self._grow(cache, nxt)
                cache = nxt
                bias = np.concatenate(
                    [bias, np.full(bias.shape[:3] + (S - bias.shape[3],), NEG_INF, np.float32)],
                    -1)
            bias[:, 0, 0, slot] = 0.0
            if idx is None or len(idx) != Bc:            # [row, kv head, slot] per bucket size
                idx = np.zeros((Bc, Nk, 3), np.int32)
                idx[:, :, 0] = np.arange(Bc)[:, None]
                idx[:, :, 1] = np.arange(Nk)[None, :]
            idx[:, :, 2] = slot
            freqs = (plen + t).astype(np.float32)[:, None] * self._inv_freq[None, :]
            emb = np.concatenate((freqs, freqs), -1)                             # (Bc, D)
            cos, sin = np.cos(emb), np.sin(emb)
            if self._rope_scaling != 1:
                cos, sin = cos * self._rope_scaling, sin * self._rope_scaling
            cos_k, sin_k = np.tile(cos, Nk), np.tile(sin, Nk)
            cos_q, sin_q = np.tile(cos * scale, Nq), np.tile(sin * scale, Nq)
            self._note("decode", (Bc, S))
            step = (cache.decode_routes if rec else cache.decode)(
                Tensor(step_ids), Tensor(cos_q, dtype), Tensor(sin_q, dtype),
                Tensor(cos_k, dtype), Tensor(sin_k, dtype), Tensor(bias), Tensor(idx))
            if rec:
                step, used = step
                used = self._full_layers(used.asnumpy().reshape(-1, Bc, 1, self._k))
                for j in np.nonzero(rowmap >= 0)[0]:
                    routes[rowmap[j]].append(used[j])
            logits_np = step.asnumpy()
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
                        group_index=np.repeat(np.arange(len(prompt_ids)), sp.n), texts=texts,
                        routed_experts=[np.concatenate(r) for r in routes])

    def _recording(self) -> bool:
        return self.record_routes and bool(self.model.spec.moe_layer_ids)

    def _full_layers(self, used: np.ndarray) -> np.ndarray:
        """(MoE layers, B, S, k) -> (B, S, num_hidden_layers, k) int16, -1 at dense layers."""
        out = np.full(used.shape[1:3] + (self._layers, self._k), -1, np.int16)
        for j, layer in enumerate(self.model.spec.moe_layer_ids):
            out[:, :, layer] = used[j]
        return out
