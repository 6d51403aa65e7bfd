"""MindSporeBackend training: gradient parity with torch for every registered policy loss,
AdamW + clipping parity with torch.optim.AdamW, real parameter updates, gradient accumulation,
bucket compile counts, checkpoint resume."""

import dataclasses

import numpy as np
import pytest
import torch

from algorithms.ops import get_ops
from algorithms.policy_loss import POLICY_LOSSES
from algorithms.rl_loss import rl_loss
from mindrl.backends.mindspore import MindSporeBackend
from mindrl.types import LossNormalizers, SamplingParams
from ms_helpers import ms_config, random_batch, split


def _torch_loss_and_grads(model, batch, cfg, norm, temperature=1.0):
    """The torch reference: rl_loss with the torch ops namespace on the same weights."""
    model.zero_grad()
    tb = batch.tokens
    P = tb.prompt_len
    logits = model(input_ids=torch.tensor(tb.input_ids),
                   attention_mask=torch.tensor(tb.attention_mask),
                   position_ids=torch.tensor(tb.position_ids)).logits[:, P - 1:-1] / temperature
    logp = torch.gather(torch.log_softmax(logits, -1), -1,
                        torch.tensor(tb.input_ids[:, P:]).unsqueeze(-1)).squeeze(-1)
    from algorithms.entropy import entropy_from_logits

    ops = get_ops("torch")
    ent = entropy_from_logits(ops, logits if cfg.algorithm.entropy_coef else logits.detach())
    t = lambda a: None if a is None else torch.tensor(a)  # noqa: E731
    loss, _ = rl_loss(ops, logp=logp, old_logp=t(batch.old_logp) if batch.old_logp is not None
                      else logp.detach(), advantages=t(batch.advantages),
                      response_mask=t(tb.response_mask), ref_logp=t(batch.ref_logp),
                      entropy=ent, cfg=cfg.algorithm, global_tokens=norm.global_tokens,
                      global_seqs=norm.global_seqs, max_len=norm.max_len)
    loss.backward()
    return float(loss.detach()), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def _norm(batch, max_len=16.0):
    return LossNormalizers(float(batch.tokens.response_mask.sum()), float(len(batch)), max_len)


def _with_old_logp(batch, model, rng, temperature=1.0):
    """old_logp = the true log-probs + noise, so ratios differ from 1 and clips bind."""
    tb = batch.tokens
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(tb.input_ids),
                       attention_mask=torch.tensor(tb.attention_mask),
                       position_ids=torch.tensor(tb.position_ids)).logits[:, tb.prompt_len - 1:-1]
        lp = torch.gather(torch.log_softmax(logits / temperature, -1), -1,
                          torch.tensor(tb.input_ids[:, tb.prompt_len:]).unsqueeze(-1))
    old = (lp.squeeze(-1).numpy() + rng.normal(0, 0.3, tb.response_mask.shape)) \
        * tb.response_mask
    return dataclasses.replace(batch, old_logp=old.astype(np.float32))


def _assert_grads_close(ms_grads, torch_grads, rtol=1e-4):
    for name, g in ms_grads.items():
        ref = torch_grads[name]
        scale = max(np.abs(ref).max(), 1e-8)
        err = np.abs(g - ref).max() / scale
        assert err < rtol, f"{name}: relative gradient error {err:.2e}"


@pytest.mark.slow
@pytest.mark.parametrize("policy_loss", POLICY_LOSSES.names())
def test_gradient_parity_with_torch_every_policy_loss(policy_loss, hf_untied):
    directory, hf = hf_untied
    cfg = ms_config(f"algorithm.policy_loss={policy_loss}", "algorithm.kl.coef=0.05",
                    "algorithm.entropy_coef=0.01", "algorithm.dual_clip_c=3.0",
                    "rollout.temperature=0.8", "algorithm.loss_agg_mode=seq_mean_token_mean")
    rng = np.random.default_rng(0)
    batch = _with_old_logp(random_batch(rng, 8, ref=True), hf, rng, temperature=0.8)
    norm = _norm(batch)
    be = MindSporeBackend(cfg, model_path=directory, with_reference=True)
    # 2 micro-batches, accumulated; the covariance losses pick tokens within a micro-batch,
    # so they are compared on one micro-batch holding the whole batch
    per_micro = 8 if policy_loss in ("clip_cov", "kl_cov") else 4
    got = be.gradients(split(batch, per_micro), norm)
    assert be.train_mode == "fused", getattr(be, "fallback_reason", None)  # the loss compiled
    model = type(hf).from_pretrained(directory).float()
    _, ref = _torch_loss_and_grads(model, batch, cfg, norm, temperature=0.8)
    _assert_grads_close(got, ref)


@pytest.mark.slow
def test_compiles_once_per_bucket_over_20_steps(hf_tied):
    """20 steps of 8 rows, each a batch of its own lengths, train one graph per (prompt,
    response) bucket, and the log-probs one per bucket too. One micro-batch a step: the count
    is the train step's (the accumulation of several has its own test below)."""
    directory, _ = hf_tied
    cfg = ms_config("train.lr=1e-3")
    be = MindSporeBackend(cfg, model_path=directory, prompt_buckets=[8, 16],
                          response_buckets=[8, 16])
    rng = np.random.default_rng(3)
    n_buckets = 2 * 2
    for step in range(20):
        batch = random_batch(rng, 8, max_prompt=int(rng.integers(3, 15)),
                             max_resp=int(rng.integers(2, 16)))
        be.train_step([batch], _norm(batch))
        if step % 4 == 0:
            be.logprobs(batch.tokens, temperature=1.0, micro_batch_size=4)
    assert 1 <= be.compile_count <= n_buckets
    assert be.compile_counts["logprobs"] <= n_buckets
    assert be.optimizer_steps == 20


def _trained(cfg, directory, batches, into=None):
    """A backend (``into``, or a fresh one from ``directory``) after one step per batch (2
    micro-batches of 4 rows each)."""
    be = into if into is not None else MindSporeBackend(cfg, model_path=directory)
    for b in batches:
        be.train_step(split(b, 4), _norm(b))
    return be


def _saved(be, where):
    be.save_pretrained(str(where / "model"))
    be.save_state(str(where / "state"))


def _loaded(be, where):
    be.load_pretrained(str(where / "model"))
    be.load_state(str(where / "state"))
    return be


PROMPTS, GREEDY = [[5, 6, 7], [8, 9]], SamplingParams(n=1, temperature=0.0, max_new_tokens=8)


@pytest.fixture(scope="module")
def six_steps(hf_tied, tmp_path_factory):
    """One run of 6 steps on batches of 8 rows (AdamW with weight decay, clipping, a cosine
    schedule with warmup; 2 micro-batches a step), saved to a folder after step 3. Recorded:
    the weights at the start, after steps 3, 4 and 6, each step's metrics, and at step 3 (before
    step 4) batch 4's log-probs and greedy samples of two prompts (which compiles the log-prob
    and sampler graphs). The tests below share it (one train graph compile): AdamW's parity with
    torch over steps 1-3, the resume from the folder, the load of the folder into this backend
    (its graphs compiled, its weights 3 steps on) and the accumulation of micro-batch
    gradients."""
    directory, _ = hf_tied
    cfg = ms_config("train.lr=1e-2", "train.weight_decay=0.1", "train.grad_clip=0.5",
                    "train.warmup_steps=2", "train.lr_schedule=cosine", "train.steps=6",
                    "algorithm.loss_agg_mode=token_mean")
    rng = np.random.default_rng(1)
    batches = [random_batch(rng, 8) for _ in range(6)]
    be = MindSporeBackend(cfg, model_path=directory)
    run = dict(cfg=cfg, directory=directory, batches=batches, be=be, metrics=[],
               saved=tmp_path_factory.mktemp("three_steps"))
    run["start"] = {k: v.copy() for k, v in be.named_weights()}
    for i, batch in enumerate(batches, start=1):
        run["metrics"].append(be.train_step(split(batch, 4), _norm(batch)))
        if i == 3:
            _saved(be, run["saved"])
            run["logp3"] = np.array(be.logprobs(batches[3].tokens, temperature=1.0))
            run["greedy3"] = be.native_engine().generate(PROMPTS, GREEDY).response_ids
        if i in (3, 4, 6):
            run[f"at{i}"] = {k: v.copy() for k, v in be.named_weights()}
    return run


@pytest.mark.slow
def test_adamw_clip_schedule_match_torch_and_params_move(hf_tied, six_steps):
    """The 3-step run (2 micro-batches a step) against torch.optim.AdamW + clip_grad_norm_ +
    LambdaLR on the same weights and batches: lr and gradient norm at each step, the weights
    after."""
    directory, hf = hf_tied
    run = six_steps
    cfg, before, after = run["cfg"], run["start"], run["at3"]
    model = type(hf).from_pretrained(directory).float()
    from mindrl.backends.mindspore.backend import lr_factor, total_optimizer_steps

    t = cfg.train
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, betas=tuple(t.betas), eps=t.adam_eps,
                            weight_decay=t.weight_decay)
    total = total_optimizer_steps(cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(
        s, warmup=t.warmup_steps, total=total, schedule=t.lr_schedule,
        min_ratio=t.min_lr_ratio))
    assert len(run["metrics"]) == 6
    for batch, out in zip(run["batches"][:3], run["metrics"][:3]):
        norm = _norm(batch)
        assert out["lr"] == pytest.approx(opt.param_groups[0]["lr"])
        _torch_loss_and_grads(model, batch, cfg, norm)
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        assert out["grad_norm"] == pytest.approx(float(gn), rel=1e-4)
        opt.step()
        sched.step()
    moved = [k for k in after if np.abs(after[k] - before[k]).max() > 1e-4]
    assert len(moved) == len(after), "every parameter must change (PLATFORM.md: silent no-ops)"
    ref = model.state_dict()
    for name, arr in after.items():
        # atol: 1% of one lr=1e-2 step; Adam amplifies float noise where a gradient is ~0
        np.testing.assert_allclose(arr, ref[name].numpy(), atol=1e-4, err_msg=name)


@pytest.mark.slow
def test_micro_batch_accumulation_equals_full_batch(six_steps):
    """Gradients (no step) of one micro-batch of 4 rows and of 2 micro-batches of 2 rows, on
    the shared run's backend."""
    be = six_steps["be"]
    rng = np.random.default_rng(2)
    batch = random_batch(rng, 4)
    full = be.gradients([batch], _norm(batch))
    parts = be.gradients(split(batch, 2), _norm(batch))
    for k in full:
        np.testing.assert_allclose(parts[k], full[k], rtol=1e-4, atol=1e-7)


@pytest.mark.slow
def test_resume_3_plus_3_equals_6(six_steps):
    run = six_steps
    cfg, directory = run["cfg"], run["directory"]
    resumed = _trained(cfg, directory, run["batches"][3:],
                       into=_loaded(MindSporeBackend(cfg, model_path=directory), run["saved"]))
    a, b = run["at6"], dict(resumed.named_weights())
    for k in a:
        np.testing.assert_allclose(b[k], a[k], atol=1e-6, err_msg=k)
    assert resumed.optimizer_steps == 6


@pytest.mark.slow
def test_load_after_compile_reaches_compiled_graphs(six_steps):
    """Weights and optimizer state loaded into a backend whose train, log-prob and sampler
    graphs are already compiled (``Parameter.set_data`` on parameters those graphs read and
    write in place) are the ones the next step uses: its log-probs, greedy samples and the
    weights after one more step equal those the run had at the saved step (3; the backend is
    at step 6, its weights 3 steps away) and after the step that followed it."""
    run = six_steps
    busy, probe = run["be"], run["batches"][3]
    before = busy.logprobs(probe.tokens, temperature=1.0)
    _loaded(busy, run["saved"])

    want = run["logp3"]
    assert np.abs(before - want).max() > 1e-3           # the load has something to change
    np.testing.assert_allclose(busy.logprobs(probe.tokens, temperature=1.0), want, atol=1e-6)
    assert busy.native_engine().generate(PROMPTS, GREEDY).response_ids == run["greedy3"]
    busy.train_step(split(probe, 4), _norm(probe))
    a, b = run["at4"], dict(busy.named_weights())
    for k in a:
        np.testing.assert_allclose(b[k], a[k], atol=1e-6, err_msg=k)
