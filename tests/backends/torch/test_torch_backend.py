"""TorchBackend: scoring equals a plain forward, train_step learns, accumulation and resume are
exact, weights keep Hugging Face names, the lr schedule is what the config says."""

import math

import numpy as np
import pytest
import torch

from mindrl.types import LossNormalizers, TrainBatch


def _backend(cfg, **kw):
    from mindrl.backends.base import build_backend

    return build_backend("torch", cfg, **kw)


def _norm(batch: TrainBatch, max_len=5.0):
    return LossNormalizers(global_tokens=float(batch.tokens.response_mask.sum()),
                           global_seqs=float(len(batch)), max_len=max_len)


def _params(backend):
    return {k: v.detach().clone() for k, v in backend.model.named_parameters()}


def _max_diff(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def cfg(tiny_dir, make_cfg):
    return make_cfg(tiny_dir, train={"lr": 1e-3, "grad_clip": 1.0},
                    rollout={"temperature": 0.7})


def test_logprobs_equal_a_plain_forward(cfg, fixed_batch):
    be = _backend(cfg, with_reference=True)
    batch = fixed_batch().tokens
    logp, ent = be.logprobs_and_entropy(batch, temperature=0.7, micro_batch_size=3)
    ids = torch.from_numpy(batch.input_ids)
    with torch.no_grad():
        logits = be.model(input_ids=ids, attention_mask=torch.from_numpy(batch.attention_mask),
                          position_ids=torch.from_numpy(batch.position_ids)).logits
    P, T = batch.prompt_len, batch.response_len
    ref = torch.log_softmax(logits[:, P - 1:P - 1 + T] / 0.7, -1)
    want = ref.gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1).numpy() * batch.response_mask
    np.testing.assert_allclose(logp, want, atol=1e-5)
    want_ent = -(ref.exp() * ref).sum(-1).numpy() * batch.response_mask
    np.testing.assert_allclose(ent, want_ent, atol=1e-4)
    # the frozen reference starts equal to the policy; no-reference backends refuse
    np.testing.assert_allclose(be.logprobs(batch, temperature=0.7, reference=True), logp,
                               atol=1e-6)
    assert logp.dtype == np.float32 and logp.shape == batch.response_mask.shape


def test_train_step_changes_parameters_and_reduces_loss(cfg, fixed_batch):
    be = _backend(cfg)
    batch = fixed_batch()
    batch.old_logp = be.logprobs(batch.tokens, temperature=0.7)
    before = _params(be)
    losses = []
    for _ in range(4):
        m = be.train_step([batch.rows(slice(0, 4)), batch.rows(slice(4, 8))], _norm(batch))
        losses.append(m["loss"])
        assert all(math.isfinite(v) for v in m.values()), m
    assert _max_diff(before, _params(be)) > 1e-4
    assert losses[-1] < losses[0] - 1e-3, losses          # -A * ratio falls as logp rises
    after = be.logprobs(batch.tokens, temperature=0.7)
    mask = batch.tokens.response_mask
    assert (after * mask).sum() > (batch.old_logp * mask).sum()
    for key in ("grad_norm", "lr", "pg_loss", "clipfrac", "entropy", "update_skipped"):
        assert key in m, key
    with pytest.raises(RuntimeError, match="with_reference"):
        be.logprobs(batch.tokens, temperature=0.7, reference=True)


def test_micro_batch_accumulation_equals_one_big_batch(cfg, fixed_batch):
    batch = fixed_batch(seed=3)
    a, b = _backend(cfg), _backend(cfg)
    batch.old_logp = a.logprobs(batch.tokens, temperature=0.7) - 0.05  # ratios != 1
    ma = a.train_step([batch], _norm(batch))
    mb = b.train_step([batch.rows(slice(i, i + 2)) for i in range(0, 8, 2)], _norm(batch))
    assert _max_diff(_params(a), _params(b)) < 1e-5
    assert ma["grad_norm"] == pytest.approx(mb["grad_norm"], rel=1e-5)
    assert ma["loss"] == pytest.approx(mb["loss"], abs=1e-6)
    assert ma["clipfrac"] == pytest.approx(mb["clipfrac"], abs=1e-6)


def test_non_finite_loss_skips_the_update(cfg, fixed_batch):
    be = _backend(cfg)
    batch = fixed_batch()
    batch.advantages = batch.advantages * np.nan
    before = _params(be)
    m = be.train_step([batch], _norm(batch))
    assert m["update_skipped"] == 1.0 and _max_diff(before, _params(be)) == 0.0


def test_save_state_load_state_round_trip(cfg, fixed_batch, tmp_path):
    batch = fixed_batch(seed=5)
    a = _backend(cfg)
    batch.old_logp = a.logprobs(batch.tokens, temperature=0.7)
    a.train_step([batch], _norm(batch))
    a.save_pretrained(str(tmp_path))
    rng_at_save = torch.get_rng_state()
    a.save_state(str(tmp_path))
    torch.manual_seed(123)                       # the RNG state must come back too
    m2a = a.train_step([batch], _norm(batch))

    b = _backend(cfg)
    b.load_state(str(tmp_path))                  # weights + optimizer + scheduler + rng
    assert torch.equal(torch.get_rng_state(), rng_at_save)
    m2b = b.train_step([batch], _norm(batch))
    assert _max_diff(_params(a), _params(b)) < 1e-6
    assert m2a["lr"] == m2b["lr"] and m2a["loss"] == pytest.approx(m2b["loss"], abs=1e-6)
    assert b.optimizer_steps == a.optimizer_steps == 2


def test_named_weights_use_hugging_face_names(cfg, tmp_path):
    from transformers import AutoModelForCausalLM

    be = _backend(cfg)
    names = [n for n, _ in be.named_weights()]
    assert names == list(be.model.state_dict().keys())
    assert all(isinstance(w, np.ndarray) for _, w in be.named_weights())
    be.save_pretrained(str(tmp_path))
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path), local_files_only=True)
    hf_state = hf.state_dict()
    for n, w in be.named_weights():
        np.testing.assert_array_equal(hf_state[n].numpy(), w)


def test_lr_schedule_warmup_then_cosine():
    from mindrl.backends.torch import lr_factor

    f = [lr_factor(s, warmup=2, total=6, schedule="cosine", min_ratio=0.1) for s in range(7)]
    assert f[0] == pytest.approx(0.5) and f[1] == pytest.approx(1.0)
    assert f[2] == pytest.approx(1.0) and f[6] == pytest.approx(0.1)
    assert f[4] == pytest.approx(0.1 + 0.9 * 0.5)      # half way through the decay
    assert lr_factor(9, warmup=0, total=6, schedule="constant", min_ratio=0.0) == 1.0


def test_missing_model_files_are_named_before_loading(tmp_path, make_cfg):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="tokenizer files.*weights"):
        _backend(make_cfg(str(tmp_path)))


def test_on_policy_step_without_old_logp_and_the_logprob_gap(cfg, fixed_batch):
    batch = fixed_batch(seed=9)
    a, b = _backend(cfg), _backend(cfg)
    current = a.logprobs(batch.tokens, temperature=0.7)
    batch.old_logp = current
    ma = a.train_step([batch], _norm(batch))
    rollout = (current + 0.01) * batch.tokens.response_mask
    micro = [TrainBatch(batch.tokens.rows(s), batch.advantages[s], None, rollout_logp=rollout[s])
             for s in (slice(0, 4), slice(4, 8))]
    mb = b.train_step(micro, _norm(batch))
    assert _max_diff(_params(a), _params(b)) < 1e-5           # same gradient as ratio == 1
    assert mb["rollout/logprob_gap_mean"] == pytest.approx(0.01, abs=1e-5)
    assert mb["rollout/logprob_gap_max"] == pytest.approx(0.01, abs=1e-5)
    assert ma["loss"] == pytest.approx(mb["loss"], abs=1e-6)


def test_sft_step_lowers_the_nll(cfg, fixed_batch):
    be = _backend(cfg)
    tokens = fixed_batch(seed=4).tokens
    norm = _norm(fixed_batch(seed=4))
    first = be.sft_step([tokens.rows(slice(0, 4)), tokens.rows(slice(4, 8))], norm)
    for _ in range(5):
        last = be.sft_step([tokens], norm)
    want = -(be.logprobs(tokens, temperature=1.0) * tokens.response_mask).sum() \
        / tokens.response_mask.sum()
    assert last["loss"] < first["loss"] - 0.1 and first["nll"] == pytest.approx(first["loss"])
    assert want < last["loss"]                                  # the step after last lowered it
