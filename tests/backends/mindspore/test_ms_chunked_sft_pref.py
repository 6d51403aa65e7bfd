"""The LM head in chunks (train.logprob_chunk_tokens) in the MindSpore SFT, DPO and SimPO (+ its
SFT term) steps and the exact distillation KL (algorithm.distill.estimator=full): gradients,
losses and metrics equal the full-vocabulary path, with tied and untied heads and with LoRA;
a long SFT row and a long DPO pair at the real vocabulary (151,936) back-propagate in bounded
memory."""

import dataclasses
import os

import numpy as np
import pytest

from mindrl.backends.mindspore import MindSporeBackend
from mindrl.types import LossNormalizers, pad_token_batch
from ms_helpers import VOCAB, ms_config, random_batch


def _set_chunk(be, n):
    be.cfg = dataclasses.replace(be.cfg, train=dataclasses.replace(be.cfg.train,
                                                                   logprob_chunk_tokens=n))


def _with_pref(be, **kw):
    be.cfg = dataclasses.replace(be.cfg, preference=dataclasses.replace(be.cfg.preference, **kw))


def _sums_and_grads(be, kind, micro, norm):
    """(metric sums, gradients by name) of ``kind`` over ``micro``, no update."""
    from mindrl.backends.mindspore.weights import write_param

    sums = be._accumulate(kind, *be._prepare(kind, micro, norm))[0]
    grads = {p.name: g for p, g in zip(be.params, be.optimizer.grad_arrays())}
    be.optimizer.zero_grad()
    write_param(be._loss_acc, np.zeros(1, np.float32))
    return sums, grads


def _assert_same(got, want, rel=1e-5):
    (s_got, g_got), (s_want, g_want) = got, want
    assert set(s_got) == set(s_want) and "loss" in s_want
    # a metric that is a difference of sums (reward_margin) carries their float32 rounding;
    # the chunked head's products run on NumPy's BLAS (host_head): sums of a dozen log-probs
    # that each differ by a few ulp
    big = max(abs(v) for v in s_want.values())
    for k, v in s_want.items():
        assert s_got[k] == pytest.approx(v, rel=5e-5, abs=3e-7 * max(big, 10.0)), k
    assert set(g_got) == set(g_want)
    assert max(float(np.abs(g).max()) for g in g_want.values()) > 1e-3
    for name, g in g_want.items():
        scale = float(np.abs(g).max())
        err = float(np.abs(g_got[name] - g).max())
        assert err <= rel * max(scale, 1e-6), f"{name}: {err:.3g} vs scale {scale:.3g}"


def _chunked(be, kind):
    return [k for k in be._train_fns if k[0] == kind and "chunked" in k]


def _full_and_chunked(be, kind, micro, norm, chunk=5):
    built = len(_chunked(be, kind))
    _set_chunk(be, 0)
    want = _sums_and_grads(be, kind, micro, norm)
    assert len(_chunked(be, kind)) == built
    _set_chunk(be, chunk)
    got = _sums_and_grads(be, kind, micro, norm)
    assert len(_chunked(be, kind)) == built + 1, f"the chunked {kind} step did not run"
    return got, want


def _pairs(rng, B):
    prompts = [list(rng.integers(1, VOCAB, rng.integers(2, 9))) for _ in range(B)]
    resp = lambda: [list(rng.integers(1, VOCAB, rng.integers(1, 13)))  # noqa: E731
                    for _ in range(B)]
    return pad_token_batch(prompts, resp(), 0), pad_token_batch(prompts, resp(), 0)


@pytest.mark.slow
@pytest.mark.parametrize("variant,losses", [("tied", ("sft", "dpo", "simpo")),
                                            ("untied", ("sft", "simpo")),
                                            ("lora", ("sft", "dpo"))])
def test_chunked_sft_dpo_simpo_equal_full_logits(hf_tied, hf_untied, variant, losses):
    # Ragged rows in two micro-batches, chunks of 5 tokens (9-13 scored tokens per SFT
    # micro-batch, 2 pairs' worth per preference one). Tied: the head's gradient lands on the
    # embedding; untied: on lm_head; LoRA: a frozen head, the reference is the policy with its
    # adapters off.
    directory = (hf_untied if variant == "untied" else hf_tied)[0]
    over = ("model.lora.enabled=true", "model.lora.rank=4") if variant == "lora" else ()
    be = MindSporeBackend(ms_config("preference.loss=dpo", "preference.label_smoothing=0.1",
                                    *over), model_path=directory, with_reference=True)
    assert be.spec.tie_word_embeddings == (variant != "untied")
    rng = np.random.default_rng(3)
    if variant == "lora":
        from mindrl.backends.mindspore.weights import write_param

        for p in be.params:                 # adapters that change the output
            if "lora_B" in p.name:
                write_param(p, rng.normal(0, 0.05, p.shape).astype(np.float32))
        assert all("lora" in p.name for p in be.params)

    if "sft" in losses:                     # SFT: mean NLL over the response tokens
        tokens = random_batch(rng, 8).tokens
        norm = LossNormalizers(float(tokens.response_mask.sum()), 8.0, 16.0)
        sft = [tokens.rows(slice(0, 4)), tokens.rows(slice(4, 8))]
        got, want = _full_and_chunked(be, "sft", sft, norm)
        _assert_same(got, want)
        assert want[0]["nll"] > 1.0

    chosen, rejected = _pairs(rng, 4)
    if "dpo" in losses:     # DPO: sequence sums against the reference pass (chunked too)
        refs = {}
        for n in (0, 5):
            _set_chunk(be, n)
            refs[n] = [be.logprobs(tb, temperature=1.0, reference=True)
                       for tb in (chosen, rejected)]
        for a, b in zip(refs[0], refs[5]):
            # the chunked pass's head on NumPy's BLAS in host memory (host_head): float32
            # rounding of another GEMM, a few ulp
            np.testing.assert_allclose(b, a, atol=1e-5, rtol=0)
            assert np.abs(a).max() > 1.0
        ref_c, ref_r = (r + rng.normal(0, 0.5, r.shape) * (r != 0) for r in refs[0])
        micro = [(chosen.rows(s), rejected.rows(s), ref_c[s], ref_r[s])
                 for s in (slice(0, 2), slice(2, 4))]
        got, want = _full_and_chunked(be, "pref", micro, 4.0)
        _assert_same(got, want)
        assert abs(want[0]["reward_margin"]) > 1e-2

    if "simpo" in losses:   # SimPO with its SFT term: length-averaged sums, no reference
        _with_pref(be, loss="simpo", beta=2.0, gamma=0.5, pref_ftx=0.5, label_smoothing=0.0)
        micro = [(chosen.rows(s), rejected.rows(s), None, None)
                 for s in (slice(0, 2), slice(2, 4))]
        got, want = _full_and_chunked(be, "pref", micro, 4.0)
        _assert_same(got, want)
        assert want[0]["sft_loss"] > 1.0


@pytest.mark.slow
def test_chunked_exact_distillation_kl_equals_full_logits(hf_untied, hf_tied):
    # algorithm.distill.estimator=full: the exact reverse KL to a different (tied) teacher,
    # a chunk of the student's and the teacher's logits at a time, under the rollout's
    # temperature and top-k, the teacher at its own temperature; untied student head.
    student_dir, teacher_dir = hf_untied[0], hf_tied[0]
    cfg = ms_config("algorithm.distill.mode=loss", f"algorithm.distill.teacher={teacher_dir}",
                    "algorithm.distill.estimator=full", "algorithm.distill.coef=0.7",
                    "algorithm.distill.teacher_temperature=0.9", "rollout.temperature=0.8",
                    "rollout.top_k=50", "algorithm.entropy_coef=0.01",
                    "algorithm.loss_agg_mode=seq_mean_token_mean")
    be = MindSporeBackend(cfg, model_path=student_dir)
    assert be._full_kl() and not be.spec.tie_word_embeddings
    rng = np.random.default_rng(5)
    batch = random_batch(rng, 8, old=True)
    tb = batch.tokens
    norm = LossNormalizers(float(tb.response_mask.sum()), 8.0, 16.0)
    micro = [batch.rows(np.arange(0, 4)), batch.rows(np.arange(4, 8))]
    got, want = _full_and_chunked(be, "rl", micro, norm)
    _assert_same(got, want)
    assert want[0]["distill_kl"] > 1e-2 and want[0]["entropy"] > 1.0


@pytest.mark.slow
@pytest.mark.parametrize("step", ["sft", "dpo"])
def test_sft_and_dpo_at_the_real_vocabulary_train_in_bounded_memory(tmp_path_factory, step,
                                                                  head_memory_bench):
    # One 1,024-token SFT row; one DPO pair of 512-token responses (1,024 scored tokens), its
    # reference pass included. Full logits (train.logprob_chunk_tokens=0, the only path these
    # steps had): +2.19 GB (SFT) / +2.18 GB (DPO); chunked: +0.43 / +0.36 GB (the Benchmarks
    # page): one chunk's head work, the decoder and the compiled graphs.
    cache = os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")
    out = head_memory_bench.measure(1024, -1, cache, backend="mindspore", step=step)
    print(f"{step}, 1024 tokens, V={out['vocab']}: peak RSS +{out['peak_delta'] / 1e9:.3f} GB")
    assert out["vocab"] == 151936 and out["tokens"] == 1024
    assert out["chunk"] == 44 and out["short_chunked"]            # automatic at V = 151,936
    assert out["short_grad_rel"] <= 1e-5, out
    assert out["finite"] and out["head_grad"] > 0
    assert out["peak_delta"] < 1.5e9, f"peak {out['peak_delta'] / 1e9:.2f} GB: {out}"
