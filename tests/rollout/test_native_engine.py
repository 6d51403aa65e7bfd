"""Engine ``native`` (the torch decode loop): log-probs equal a plain forward, sampling options
are respected, stop / length finish reasons, seeding, left padding; greedy tokens and log-probs
equal transformers ``generate``'s, each prompt is prefilled once per group, finished rows leave
the batch, and finished groups are reported while others decode."""

import numpy as np
import pytest
import torch

from mindrl.types import SamplingParams

PROMPTS = [[1, 328, 201, 329, 267, 223, 19, 20, 21, 13, 22, 23, 33, 2, 201],
           [1, 328, 201, 19],
           [1, 333, 223, 26, 22, 810, 811]]


@pytest.fixture(scope="module")
def backend(tiny_dir, make_cfg):
    from mindrl.backends.base import build_backend

    return build_backend("torch", make_cfg(tiny_dir))


@pytest.fixture(scope="module")
def engine(backend, make_cfg, tiny_dir):
    from mindrl.rollout import build_engine

    return build_engine("native", make_cfg(tiny_dir), backend=backend)


@pytest.mark.parametrize("opts", [dict(temperature=0.7), dict(temperature=1.3, top_k=20,
                                                                top_p=0.9, min_p=0.01)])
def test_logprobs_equal_a_plain_forward(engine, backend, opts, forward_logprobs):
    """Log-probs of the distribution sampled from: under top-k / min-p / top-p, the truncated
    and renormalised one (never a cut token: every sampled token is in the kept set)."""
    from algorithms.truncation import Truncation

    r = engine.generate(PROMPTS, SamplingParams(n=4, max_new_tokens=12, seed=0, **opts))
    trunc = Truncation(opts.get("top_k", -1), opts.get("top_p", 1.0), opts.get("min_p", 0.0))
    want = forward_logprobs(backend.model, r, opts["temperature"],
                            trunc if trunc.active else None)
    if trunc.active:       # the truncation moved the log-probs (not the untruncated ones)
        full = forward_logprobs(backend.model, r, opts["temperature"])
        assert np.abs(full - want).max() > 0.05
    for i, lp in enumerate(r.logprobs):
        assert lp.dtype == np.float32 and len(lp) == len(r.response_ids[i])
        np.testing.assert_allclose(lp, want[i, :len(lp)], atol=1e-5)


def test_n_samples_prompt_major(engine):
    r = engine.generate(PROMPTS, SamplingParams(n=4, max_new_tokens=6, seed=0))
    assert len(r) == 12 and list(r.group_index) == [0] * 4 + [1] * 4 + [2] * 4
    assert r.prompt_ids[5] == PROMPTS[1] and len(r.texts) == 12
    assert len({tuple(x) for x in r.response_ids[:4]}) > 1          # samples differ


def test_top_k_1_equals_greedy_and_padding_does_not_leak(engine):
    greedy = engine.generate(PROMPTS, SamplingParams(n=1, temperature=0.0, max_new_tokens=8))
    topk1 = engine.generate(PROMPTS, SamplingParams(n=2, temperature=0.8, top_k=1,
                                                    max_new_tokens=8, seed=3))
    assert topk1.response_ids[::2] == greedy.response_ids
    assert topk1.response_ids[1::2] == greedy.response_ids
    alone = engine.generate([PROMPTS[1]], SamplingParams(n=1, temperature=0.0,
                                                         max_new_tokens=8))
    assert alone.response_ids[0] == greedy.response_ids[1]          # left padding is invisible


def test_stop_tokens_and_length(engine):
    stops = tuple(range(3, 600))           # most of the vocab: rows stop within a few tokens
    r = engine.generate(PROMPTS, SamplingParams(n=4, max_new_tokens=30, seed=1,
                                                stop_token_ids=stops))
    stopped = [i for i, f in enumerate(r.finish_reasons) if f == "stop"]
    assert stopped, r.finish_reasons
    for i in stopped:
        ids = r.response_ids[i]
        assert ids[-1] in stops and not any(t in stops for t in ids[:-1])
    r = engine.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=5, seed=1))
    for ids, f in zip(r.response_ids, r.finish_reasons):
        assert (f == "length") == (len(ids) == 5) and len(ids) <= 5


def test_seeded_and_state_resumable(engine):
    sp = SamplingParams(n=2, max_new_tokens=6, seed=11)
    a = engine.generate(PROMPTS, sp)
    assert engine.generate(PROMPTS, sp).response_ids == a.response_ids      # same seed
    other = engine.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=6, seed=12))
    assert other.response_ids != a.response_ids
    sp = SamplingParams(n=2, max_new_tokens=6, seed=None)     # unseeded: a per-call stream
    state = engine.state_dict()
    a = engine.generate(PROMPTS, sp)
    b = engine.generate(PROMPTS, sp)                 # next call: a new draw
    engine.load_state_dict(state)
    c = engine.generate(PROMPTS, sp)
    assert a.response_ids == c.response_ids and a.response_ids != b.response_ids
    rng = torch.get_rng_state()
    engine.generate(PROMPTS, sp)
    assert torch.equal(rng, torch.get_rng_state())   # the trainer's RNG is untouched


def test_shared_engine_ignores_weights_it_already_has(engine):
    def boom():
        raise AssertionError("iterator consumed")
        yield  # pragma: no cover

    engine.load_weights(boom())


LENGTHS = [2, 5, 16, 9, 3, 16, 7, 1, 12]     # one per row of 3 prompts x 3 samples


def _force_lengths(targets, eos):
    """A ``mindrl_logits_hook`` that ends row i at ``targets[i]`` tokens (EOS forced there,
    suppressed before)."""
    def per_call(rows):
        want = torch.tensor(targets[:rows])

        def step(row_ids, t, scores):
            scores = scores.clone()
            end = want[row_ids] - 1 == t
            scores[:, eos] = float("-inf")
            scores[end] = float("-inf")
            scores[end, eos] = 0.0
            return scores

        return step

    return per_call


@pytest.fixture
def forced(engine):
    engine.model.mindrl_logits_hook = _force_lengths(LENGTHS, engine.tokenizer.eos_token_id)
    yield engine
    del engine.model.mindrl_logits_hook


def test_greedy_equals_generate_and_finished_rows_leave_the_batch(forced):
    T, engine = 16, forced
    sp = SamplingParams(n=3, temperature=0.0, max_new_tokens=T)
    shapes = []
    hook = engine.model.register_forward_pre_hook(
        lambda mod, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        mine = engine.generate(PROMPTS, sp)
    finally:
        hook.remove()
    ref = engine.generate_hf(PROMPTS, sp)
    lengths = [len(r) for r in ref.response_ids]
    assert lengths == LENGTHS                          # the rows really end at different steps
    assert mine.response_ids == ref.response_ids
    assert mine.finish_reasons == ref.finish_reasons
    for a, b in zip(mine.logprobs, ref.logprobs):
        np.testing.assert_allclose(a, b, atol=1e-5)
    # one prefill of the 3 distinct prompts (not 3 x 3 rows), then one forward per position
    # over the rows still running: those longer than it
    assert shapes[0] == (len(PROMPTS), max(len(p) for p in PROMPTS))
    live = [sum(n > t for n in lengths) for t in range(1, T)]
    assert [b for b, _ in shapes[1:]] == [x for x in live if x > 0]
    assert all(w == 1 for _, w in shapes[1:])


def test_finished_groups_are_reported_while_others_decode(forced):
    """Groups (3 samples) end at 16 (not reported: the last step), 16 (idem) and 12 tokens;
    sampled at temperature 1: the reported responses are the returned ones."""
    got = []
    sp = SamplingParams(n=3, temperature=1.0, max_new_tokens=16, seed=5)
    r = forced.generate(PROMPTS, sp, on_group_done=lambda g, resp: got.append((g, resp)))
    assert [len(x) for x in r.response_ids] == LENGTHS
    assert [g for g, _ in got] == [2]
    assert got[0][1] == r.response_ids[6:9]
