"""The native MindSpore sampler: log-probs equal a plain forward, greedy equals transformers,
filters, EOS stop, no recompiles across calls."""

import numpy as np
import pytest
import torch

from mindrl.backends.mindspore import MindSporeBackend
from mindrl.backends.mindspore.sampler import filter_probs
from mindrl.types import SamplingParams, pad_token_batch
from ms_helpers import ms_config

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12], [20]]


def test_filter_probs_top_k_top_p_min_p():
    p = np.array([[0.5, 0.3, 0.15, 0.05]])
    np.testing.assert_allclose(filter_probs(p, top_k=2), [[0.625, 0.375, 0, 0]])
    np.testing.assert_allclose(filter_probs(p, top_p=0.7), [[0.625, 0.375, 0, 0]])
    np.testing.assert_allclose(filter_probs(p, top_p=0.81), [[0.5, 0.3, 0.15, 0]] / np.float64(0.95))
    np.testing.assert_allclose(filter_probs(p, min_p=0.2), [[0.5, 0.3, 0.15, 0]] / np.float64(0.95))
    np.testing.assert_allclose(filter_probs(p), p)


def test_filter_probs_keeps_the_trainers_set_ties_included():
    # top-p 0.5 over [0.4, 0.3, 0.3]: the mass more probable than either 0.3 is 0.4 < 0.5, so
    # both stay (a cut by sorted position would keep one of them, chosen by the sort)
    np.testing.assert_allclose(filter_probs(np.array([[0.4, 0.3, 0.3]]), top_p=0.5),
                               [[0.4, 0.3, 0.3]])
    np.testing.assert_allclose(filter_probs(np.array([[0.3, 0.4, 0.3]]), top_p=0.4),
                               [[0.0, 1.0, 0.0]])
    # the same set as the reference mask the trainers use, on rows with many ties
    from algorithms.truncation import Truncation, keep_mask
    rng = np.random.default_rng(0)
    w = rng.integers(1, 6, size=(64, 40)).astype(np.float64)
    probs = w / w.sum(-1, keepdims=True)
    for k, tp, mp in [(5, 1.0, 0.0), (-1, 0.6, 0.0), (-1, 1.0, 0.5), (8, 0.7, 0.3)]:
        want = keep_mask(np.log(probs), Truncation(k, tp, mp))
        got = filter_probs(probs, top_k=k, top_p=tp, min_p=mp)
        np.testing.assert_array_equal(got > 0, want)
        np.testing.assert_allclose(got.sum(-1), 1.0)


@pytest.mark.slow
def test_sampler_logprobs_greedy_eos_and_static_shapes(hf_untied):
    directory, hf = hf_untied
    # the sampler reports log-probs under the truncation; the trainer scores with the same
    be = MindSporeBackend(ms_config("rollout.temperature=0.7", "rollout.top_p=0.9",
                                    "rollout.top_k=50", "rollout.min_p=0.01"),
                          model_path=directory)
    eng = be.native_engine()
    sp = SamplingParams(n=2, temperature=0.7, top_p=0.9, top_k=50, min_p=0.01,
                        max_new_tokens=12, seed=1)
    ro = eng.generate(PROMPTS, sp)
    assert len(ro) == 6 and list(ro.group_index) == [0, 0, 1, 1, 2, 2]
    tb = pad_token_batch(ro.prompt_ids, ro.response_ids, 0)
    lp = be.logprobs(tb, temperature=0.7, truncated=True)
    full = be.logprobs(tb, temperature=0.7)
    for i, r in enumerate(ro.response_ids):
        np.testing.assert_allclose(ro.logprobs[i], lp[i, :len(r)], atol=1e-4)
    assert np.abs(full - lp).max() > 0.05          # the truncation moved them
    again = eng.generate(PROMPTS, sp)                    # same seed, same samples
    assert again.response_ids == ro.response_ids
    assert eng.compile_counts == {"prefill": 1, "decode": 1}

    greedy = eng.generate(PROMPTS[:1], SamplingParams(n=1, temperature=0.0, max_new_tokens=10))
    with torch.no_grad():
        ref = hf.generate(torch.tensor([PROMPTS[0]]), attention_mask=torch.ones(1, 3,
                          dtype=torch.long), max_new_tokens=10, do_sample=False)
    assert greedy.response_ids[0] == ref[0, 3:].tolist()

    eos = greedy.response_ids[0][2]                      # stop at the 3rd greedy token
    stopped = eng.generate(PROMPTS[:1], SamplingParams(n=1, temperature=0.0, max_new_tokens=10,
                                                       stop_token_ids=(eos,)))
    first = greedy.response_ids[0].index(eos)
    assert stopped.response_ids[0] == greedy.response_ids[0][:first + 1]
    assert stopped.finish_reasons == ["stop"] and greedy.finish_reasons == ["length"]


@pytest.mark.slow
def test_sampler_cache_reuse_across_buckets_greedy_equals_transformers(hf_untied):
    """The per-bucket KV cache (Parameters written in place, kept between calls): greedy
    output equals transformers' unpadded greedy for every row, whatever the prompt bucket
    (16 / 32), response bucket (16 / 32), padded row count (1 / 4 / 8), and whatever an
    earlier call left in the same cache -- (4 rows, 48 slots) serves prompt bucket 16 +
    response bucket 32 and prompt bucket 32 + response bucket 16, slots laid out differently."""
    from ms_helpers import VOCAB

    directory, hf = hf_untied            # untied: greedy sequences vary (tied ones repeat)
    be = MindSporeBackend(ms_config("data.max_prompt_len=32", "rollout.max_new_tokens=40"),
                          model_path=directory)
    eng = be.native_engine()
    rng = np.random.default_rng(3)
    prompts = [[int(t) for t in rng.integers(1, VOCAB, n)] for n in (3, 9, 16, 17, 25)]
    ref = {}
    with torch.no_grad():
        for p in prompts:
            out = hf.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p),
                              dtype=torch.long), max_new_tokens=20, do_sample=False)
            ref[tuple(p)] = out[0, len(p):].tolist()
    calls = [(prompts[3:4], 20),     # 1 row, prompt bucket 32, response bucket 32
             (prompts, 12),          # 5 rows -> 8, prompt bucket 32, response bucket 16
             (prompts[:3], 20),      # 3 rows -> 4, prompt bucket 16 + response 32 = 48 slots
             (prompts[1:4], 12),     # 3 rows -> 4, prompt bucket 32 + response 16 = 48 slots
             (prompts[:3], 12),      # 3 rows -> 4, 16 + 16 slots
             (prompts[:3], 20)]      # the 48-slot cache again, after the other layout
    for batch, T in calls:
        ro = eng.generate(batch, SamplingParams(n=1, temperature=0.0, max_new_tokens=T))
        for p, got in zip(batch, ro.response_ids):
            assert got == ref[tuple(p)][:T], (len(p), T)
    assert eng.compile_counts == {"prefill": 5, "decode": 4}


@pytest.mark.slow
def test_shared_prefill_and_finished_rows_leaving_change_no_sample(hf_untied):
    """4 prompts x 4 samples at temperature 1, half the vocabulary as stop ids (rows end at
    mixed steps): one prefill of the 4 prompts (a 4-row bucket, not 16) and decode batches that
    shrink to 8, 4, ... rows as rows finish give the same tokens and log-probs as 16-row
    prefill and decode throughout (each row draws its own uniform every step)."""
    from ms_helpers import VOCAB

    directory, _ = hf_untied
    be = MindSporeBackend(ms_config("rollout.max_new_tokens=16"), model_path=directory)
    eng = be.native_engine()
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12], [20], [30, 31]]
    sp = SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=7,
                        stop_token_ids=tuple(range(1, VOCAB, 2)))
    fast = eng.generate(prompts, sp)
    seen = {k: set(v) for k, v in eng._seen.items()}
    eng.share_prefill = eng.compact = False
    plain = eng.generate(prompts, sp)
    lengths = [len(r) for r in fast.response_ids]
    assert len(set(lengths)) >= 3 and max(lengths) >= 3, lengths
    assert fast.response_ids == plain.response_ids
    assert fast.finish_reasons == plain.finish_reasons
    for a, b in zip(fast.logprobs, plain.logprobs):
        np.testing.assert_allclose(a, b, atol=1e-5)
    P, S = 16, 32
    assert seen["prefill"] == {(4, P, S)}
    live = [sum(n > t for n in lengths) for t in range(1, max(lengths))]
    # the decode buckets used: a bucket of more than 4 rows moves to the smallest power of 2
    # holding the live rows (4 at the least) once they are at most half of it
    want, rows = set(), 16
    for n_live in live:
        if rows > 4 and n_live <= rows // 2:
            rows = max(4, 1 << (n_live - 1).bit_length())
        want.add((rows, S))
    assert seen["decode"] == want and min(r for r, _ in want) < 16, (live, seen["decode"])


@pytest.mark.slow
def test_untruncated_samples_are_the_inverse_cdf_of_the_model(hf_untied):
    """Temperature 0.8, no truncation (the host draw in two levels of cumulative sums): every
    token equals the inverse CDF, at the row's uniform of that step, of a float64 softmax of
    transformers' logits for the row so far (the uniforms replayed from the seed: one per row
    and step, drawn for all rows), and its log-prob equals that softmax's at the token."""
    directory, hf = hf_untied
    eng = MindSporeBackend(ms_config(), model_path=directory).native_engine()
    eng.eos_ids = ()
    B, T = 6, 10
    ro = eng.generate(PROMPTS[:2], SamplingParams(n=3, temperature=0.8, max_new_tokens=T,
                                                  seed=11))
    rng = np.random.default_rng(11)
    u = np.stack([rng.random((B, 1))[:, 0] for _ in range(T)], 1)                 # (B, T)
    with torch.no_grad():
        for r in range(B):
            prompt, resp = ro.prompt_ids[r], ro.response_ids[r]
            assert len(resp) == T
            logits = hf(torch.tensor([prompt + resp])).logits[0, len(prompt) - 1:-1]
            z = logits.double().numpy() / 0.8                                     # (T, V)
            p = np.exp(z - z.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            ref = (np.cumsum(p, -1) <= u[r][:, None]).sum(-1)
            assert resp == ref.tolist(), r
            np.testing.assert_allclose(ro.logprobs[r], np.log(p[np.arange(T), resp]),
                                       atol=1e-4)


@pytest.mark.slow
def test_cache_growing_with_the_response_changes_no_sample(hf_untied):
    """Prompts of mixed lengths x 3 samples at temperature 1, a few stop ids (rows end at mixed
    steps, some before the first growth, some after the last): a cache that starts at prompt
    bucket + 16 slots and grows to + 32 and + 40 (the response buckets up to 40 tokens) as
    positions cross its end (rows leaving the batch meanwhile) gives the same tokens, finish
    reasons and log-probs as the full prompt bucket + 40 cache from the start."""
    from ms_helpers import VOCAB

    directory, _ = hf_untied
    be = MindSporeBackend(ms_config("rollout.max_new_tokens=40"), model_path=directory)
    eng = be.native_engine()
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18], [20], [30, 31, 32, 33]]
    sp = SamplingParams(n=3, temperature=1.0, max_new_tokens=40, seed=5,
                        stop_token_ids=tuple(range(3, VOCAB, 40)))
    eng.grow_from = 16
    grown = eng.generate(prompts, sp)
    seen = set(eng._seen["decode"])
    eng.grow_from = 0
    full = eng.generate(prompts, sp)
    lengths = sorted(len(r) for r in grown.response_ids)
    assert lengths[0] < 16 and lengths[-1] > 32, lengths
    assert grown.response_ids == full.response_ids
    assert grown.finish_reasons == full.finish_reasons
    assert "stop" in grown.finish_reasons and "length" in grown.finish_reasons
    for a, b in zip(grown.logprobs, full.logprobs):
        np.testing.assert_allclose(a, b, atol=1e-5)
    P = 16
    assert {s for _, s in seen} == {P + 16, P + 32, P + 40}, seen
    assert eng._seen["prefill"] == {(4, P, P + 16), (4, P, P + 40)}
    # a full cache over the growth budget (bytes) starts at the full size: no smaller cache
    eng.grow_from, eng.grow_max_bytes = 16, 0
    eng._seen.clear()
    again = eng.generate(prompts, sp)
    assert again.response_ids == full.response_ids
    assert {s for _, s in eng._seen["decode"]} == {P + 40}, eng._seen["decode"]
