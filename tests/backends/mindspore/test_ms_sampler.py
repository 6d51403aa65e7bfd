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


@pytest.mark.slow
def test_sampler_logprobs_greedy_eos_and_static_shapes(hf_untied):
    directory, hf = hf_untied
    be = MindSporeBackend(ms_config(), model_path=directory)
    eng = be.native_engine()
    sp = SamplingParams(n=2, temperature=0.7, top_p=0.9, top_k=50, min_p=0.01,
                        max_new_tokens=12, seed=1)
    ro = eng.generate(PROMPTS, sp)
    assert len(ro) == 6 and list(ro.group_index) == [0, 0, 1, 1, 2, 2]
    tb = pad_token_batch(ro.prompt_ids, ro.response_ids, 0)
    lp = be.logprobs(tb, temperature=0.7)
    for i, r in enumerate(ro.response_ids):
        np.testing.assert_allclose(ro.logprobs[i], lp[i, :len(r)], atol=1e-4)
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
