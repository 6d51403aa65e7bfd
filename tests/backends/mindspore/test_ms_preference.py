"""MindSporeBackend.preference_step: DPO / IPO / SimPO (+ pref_ftx x SFT) gradients, metrics and
AdamW updates equal the torch backend's preference_step on the same weights and pairs."""

import numpy as np
import pytest

from mindrl.backends.mindspore import MindSporeBackend
from mindrl.types import pad_token_batch
from ms_helpers import VOCAB, ms_config


def _pairs(rng, B, max_prompt=9, max_resp=12):
    prompts = [list(rng.integers(1, VOCAB, rng.integers(2, max_prompt + 1))) for _ in range(B)]
    resp = lambda: [list(rng.integers(1, VOCAB, rng.integers(1, max_resp + 1)))  # noqa: E731
                    for _ in range(B)]
    return pad_token_batch(prompts, resp(), 0), pad_token_batch(prompts, resp(), 0)


def _micro(chosen, rejected, ref_c, ref_r, size):
    out = []
    for s in range(0, len(chosen), size):
        sl = slice(s, s + size)
        out.append((chosen.rows(sl), rejected.rows(sl), None if ref_c is None else ref_c[sl],
                    None if ref_r is None else ref_r[sl]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("loss,extra", [
    ("dpo", ("preference.label_smoothing=0.1",)),
    ("ipo", ()),
    ("simpo", ("preference.beta=2.0", "preference.gamma=0.5")),
])
def test_preference_step_matches_torch_backend(loss, extra, tiny_dir):
    from mindrl.backends.torch.backend import TorchBackend

    cfg = ms_config(f"model.path={tiny_dir}", f"preference.loss={loss}", "preference.pref_ftx=0.5",
                    "train.lr=1e-3", "train.grad_clip=1.0", "train.warmup_steps=0", *extra)
    with_ref = loss != "simpo"
    ms_be = MindSporeBackend(cfg, model_path=tiny_dir, with_reference=with_ref)
    th_be = TorchBackend(cfg, with_reference=with_ref)
    rng = np.random.default_rng(5)
    steps = []
    for _ in range(2):
        chosen, rejected = _pairs(rng, 6)
        ref_c = ref_r = None
        if with_ref:                 # the reference model (= the initial weights), then perturbed
            ref_c = th_be.logprobs(chosen, temperature=1.0, reference=True) \
                + rng.normal(0, 0.5, chosen.response_mask.shape) * chosen.response_mask
            ref_r = th_be.logprobs(rejected, temperature=1.0, reference=True)
            np.testing.assert_allclose(
                ms_be.logprobs(rejected, temperature=1.0, reference=True), ref_r, atol=1e-4)
        steps.append((chosen, rejected, ref_c, ref_r))

    # gradient of one step (micro-batches of 4 + 2 pairs: the last one is smaller)
    micro = _micro(*steps[0], 4)
    got = ms_be.gradients(micro, 6.0, kind="pref")
    th_be.model.zero_grad()
    for m in micro:
        th_be._pref_micro_loss(*m, 6.0)[0].backward()
    ref = {n: p.grad.numpy().copy() for n, p in th_be.model.named_parameters()}
    th_be.model.zero_grad()
    for name, g in got.items():
        err = np.abs(g - ref[name]).max() / max(np.abs(ref[name]).max(), 1e-8)
        assert err < 1e-4, f"{name}: relative gradient error {err:.2e}"

    before = dict(ms_be.named_weights())
    for pairs in steps:
        a = ms_be.preference_step(_micro(*pairs, 4), 6.0)
        b = th_be.preference_step(_micro(*pairs, 4), 6.0)
        assert set(a) == set(b), set(a) ^ set(b)
        for k, v in b.items():
            assert a[k] == pytest.approx(v, rel=1e-4, abs=1e-5), k
    after = dict(ms_be.named_weights())
    state = th_be.model.state_dict()
    for name, arr in after.items():
        assert np.abs(arr - before[name]).max() > 1e-5, f"{name} did not move"
        np.testing.assert_allclose(arr, state[name].numpy(), atol=1e-4, err_msg=name)
    assert ms_be.compile_counts["preference_step"] == 1        # the last micro-batch
    assert ms_be.compile_counts["preference_accumulate_step"] == 2     # 4 and 2 rows


@pytest.mark.slow
def test_dpo_trainer_runs_on_mindspore(tmp_path):
    """`mindrl dpo` on backend=mindspore (the trainer used to refuse it): starts at log 2 with
    the policy equal to the reference, then learns the preference."""
    import json

    from mindrl.config.loader import load_config
    from mindrl.trainer.preference import PreferenceTrainer
    from rewards.arithmetic import generate

    pairs = tmp_path / "pairs.jsonl"
    with pairs.open("w") as f:
        for r in generate(32, seed=5, digits=2):
            f.write(json.dumps({"prompt": r["problem"], "chosen": r["answer"],
                                "rejected": str(int(r["answer"]) + 1)}) + "\n")
    cfg = load_config(None, [
        "backend=mindspore", "model.path=builtin:tiny", "model.chat_template=none",
        f"data.train_file={pairs}", "preference.loss=dpo", "preference.beta=0.5",
        "train.prompts_per_step=8", "train.micro_batch_size=4", "train.lr=3e-3",
        "train.steps=20", "rollout.max_new_tokens=8", "logging.tensorboard=false",
        "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
        "reward.num_workers=0", "reward.functions=[{name: arithmetic}]",
        f"logging.output_dir={tmp_path / 'run'}"])
    tr = PreferenceTrainer(cfg)
    tr.fit()
    tr.close()
    m = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert m[0]["pref_loss"] == pytest.approx(np.log(2), abs=1e-5)
    assert m[-1]["pref_loss"] < 0.5 * np.log(2)
    assert m[-1]["reward_accuracy"] > 0.9


@pytest.mark.parametrize("backend", ["mindspore", "torch"])
@pytest.mark.slow
def test_simpo_sft_sum_loss_by_hand(backend, tiny_dir):
    """preference.sft_term=sum (the summed sequence NLL): the step's loss equals
    SimPO + pref_ftx x mean over pairs of the chosen response's summed NLL, computed by hand
    from the backend's own token log-probs before the step."""
    from mindrl.backends.torch.backend import TorchBackend

    beta, gamma, ftx = 2.0, 1.0, 0.7
    cfg = ms_config(f"model.path={tiny_dir}", "preference.loss=simpo", f"preference.beta={beta}",
                    f"preference.gamma={gamma}", f"preference.pref_ftx={ftx}",
                    "preference.sft_term=sum", "train.lr=1e-3", "train.warmup_steps=0")
    be = MindSporeBackend(cfg, model_path=tiny_dir) if backend == "mindspore" \
        else TorchBackend(cfg)
    chosen, rejected = _pairs(np.random.default_rng(11), 6)
    lc = be.logprobs(chosen, temperature=1.0).astype(np.float64)
    lr = be.logprobs(rejected, temperature=1.0).astype(np.float64)
    mc, mr = chosen.response_mask, rejected.response_mask
    s_c, s_r = (lc * mc).sum(1), (lr * mr).sum(1)
    h = beta * s_c / mc.sum(1) - beta * s_r / mr.sum(1) - gamma
    pref = np.log1p(np.exp(-h)).mean()
    sft = (-s_c).mean()                       # summed over tokens, averaged over pairs
    assert sft > 2 * (-(s_c / mc.sum(1))).mean()     # differs from the per-token mean
    m = be.preference_step(_micro(chosen, rejected, None, None, 6), 6.0)
    assert m["sft_loss"] == pytest.approx(sft, rel=1e-4)
    assert m["pref_loss"] == pytest.approx(pref, rel=1e-4)
    assert m["loss"] == pytest.approx(pref + ftx * sft, rel=1e-4)


@pytest.mark.slow
def test_preference_responses_longer_than_the_rollout_limit_train_whole(tiny_dir):
    # preference and SFT responses are cut at data.max_response_len, not at
    # rollout.max_new_tokens (16 here): the compiled steps grow their response buckets
    from mindrl.backends.torch.backend import TorchBackend

    cfg = ms_config(f"model.path={tiny_dir}", "preference.loss=simpo", "preference.beta=2.0")
    ms_be = MindSporeBackend(cfg, model_path=tiny_dir)
    th_be = TorchBackend(cfg)
    rng = np.random.default_rng(7)
    prompts = [list(rng.integers(1, VOCAB, n)) for n in (3, 6)]
    chosen = pad_token_batch(prompts, [list(rng.integers(1, VOCAB, n)) for n in (40, 23)], 0)
    rejected = pad_token_batch(prompts, [list(rng.integers(1, VOCAB, n)) for n in (9, 31)], 0)
    assert chosen.response_len > 16 and ms_be.response_buckets[-1] == 16
    micro = _micro(chosen, rejected, None, None, 2)
    got = ms_be.gradients(micro, 2.0, kind="pref")
    assert ms_be.response_buckets[-1] >= chosen.response_len
    th_be.model.zero_grad()
    th_be._pref_micro_loss(*micro[0], 2.0)[0].backward()
    want = {n: p.grad.numpy() for n, p in th_be.model.named_parameters()}
    for name, g in got.items():
        np.testing.assert_allclose(g, want[name], atol=2e-5 * float(np.abs(want[name]).max()))
