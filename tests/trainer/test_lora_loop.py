"""LoRA in the RL loop on both backends: resume (2 steps + resume + 2 steps == 4 steps, the
uninterrupted run doubling as the smoke: KL to the adapters-off reference, adapters move) and
`mindrl export` of the adapter."""

import numpy as np
import pytest

from test_rl_loop import cfg_for, rows
from trainer_helpers import fit_stopped_by_sigterm

LORA = ["model.lora.enabled=true", "model.lora.rank=4", "model.lora.alpha=8",
        "reward.functions=[{name: 'trainer_helpers:parity_reward'}]", "train.lr=1e-2"]


def adapters(trainer):
    """{name: array} of the trainable adapter tensors of either backend."""
    be = trainer.backend
    if be.name == "torch":
        from mindrl.backends.torch.lora import adapter_tensors

        return {n: t.detach().numpy().copy() for n, t in adapter_tensors(be.model)}
    from mindrl.backends.mindspore.lora import adapter_arrays

    return {n: a.copy() for n, a in adapter_arrays(be.model)}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_lora_resume_equals_uninterrupted(tmp_path, monkeypatch, backend):
    """The uninterrupted run is also the smoke: KL to the adapters-off reference (no second
    model), finite loss and KL, KL > 0 once the adapters have moved."""
    from mindrl.trainer.rl import RLTrainer

    extra = [f"backend={backend}", "train.steps=4", "checkpoint.every=100",
             "algorithm.kl.coef=0.05", "train.lr_schedule=cosine", "train.warmup_steps=1",
             *LORA]
    full = tmp_path / "full"
    tr = RLTrainer(cfg_for(full, *extra))
    assert tr.backend.reference is None              # the reference is the adapters-off model
    w_init = adapters(tr)
    tr.fit()
    w_full = adapters(tr)
    tr.close()
    m = rows(full)
    assert all(np.isfinite(r["loss"]) and np.isfinite(r["kl"]) for r in m) and m[-1]["kl"] > 0, m
    assert any(not np.allclose(w_init[k], w_full[k]) for k in w_init)

    part = tmp_path / "part"
    tr = RLTrainer(cfg_for(part, *extra))
    fit_stopped_by_sigterm(tr, monkeypatch)   # SIGTERM during the 2nd step: checkpoint at 2
    model_dir = part / "checkpoints" / "step_000002" / "model"
    files = sorted(p.name for p in model_dir.iterdir())
    assert "adapter_model.safetensors" in files
    assert not [f for f in files if f.startswith("model") and f.endswith(".safetensors")]

    tr = RLTrainer(cfg_for(part, *extra))
    tr.fit()
    w_part = adapters(tr)
    tr.close()
    a, b = rows(full), rows(part)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for key in ("reward/mean", "loss", "grad_norm", "kl", "response_length/mean"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-4, abs=1e-4), (ra["step"], key)
    assert set(w_full) == set(w_part)
    for k in w_full:
        np.testing.assert_allclose(w_full[k], w_part[k], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
def test_export_merges_into_a_plain_hf_model(tmp_path, backend):
    import torch
    from transformers import AutoModelForCausalLM

    from mindrl.cli import main
    from mindrl.trainer.rl import RLTrainer

    run = tmp_path / "run"
    tr = RLTrainer(cfg_for(run, f"backend={backend}", "train.steps=2",
                           "checkpoint.save_final=true", *LORA))
    tr.fit()
    from lora_probe import probe_batch

    tb = probe_batch()
    want = tr.backend.logprobs(tb, temperature=1.0)
    base = tr.backend.logprobs(tb, temperature=1.0, reference=True) \
        if backend == "torch" else None
    tr.close()
    out = tmp_path / "merged"
    assert main(["export", str(run), "--out", str(out)]) == 0
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(str(out), local_files_only=True).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(tb.input_ids),
                       attention_mask=torch.tensor(tb.attention_mask),
                       position_ids=torch.tensor(tb.position_ids)).logits
    P = tb.prompt_len
    lp = torch.log_softmax(logits[:, P - 1:-1].float(), -1)
    got = torch.gather(lp, -1, torch.tensor(tb.input_ids[:, P:]).unsqueeze(-1)).squeeze(-1)
    got = got.numpy() * tb.response_mask
    np.testing.assert_allclose(got, want, atol=5e-5)
    if base is not None:                     # the export is not just the base model
        assert np.abs(got - base).max() > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("backend, mode", [("torch", "merged"), ("torch", "adapter"),
                                           ("mindspore", "adapter")])
def test_vllm_with_lora_stays_in_sync(tmp_path, backend, mode):
    """vLLM follows the LoRA policy after every update, either as merged weights W + s * B A
    (a full weight load per sync) or as the adapter alone (a LoRARequest per sync, base weights
    never sent): the rollout-vs-trainer log-prob gap stays at float32 noise (an engine left on
    the base policy, or on a stale adapter, would not)."""
    from mindrl.trainer.rl import RLTrainer

    cfg = cfg_for(tmp_path, f"backend={backend}", "rollout.engine=vllm", "train.steps=3",
                  f"rollout.vllm_lora={mode}", *LORA)
    tr = RLTrainer(cfg)
    tr.fit()
    sent = dict(tr.engine.sent)
    held = sorted(tr.engine.llm.llm_engine.list_loras()) if mode == "adapter" else []
    left = sorted(p.name for p in (tmp_path / "rollout_adapter").glob("*"))
    tr.close()
    m = rows(tmp_path)
    assert len(m) == 3
    for r in m:
        assert r["rollout/logprob_gap_mean"] < 2e-4, r["rollout/logprob_gap_mean"]
        assert r["grad_norm"] > 0
    if mode == "merged":
        assert sent == {"weight_loads": 3, "weight_tensors": sent["weight_tensors"],
                        "adapter_loads": 0, "moe_repacks": 0} and sent["weight_tensors"] > 0
        assert left == []
    else:                             # one adapter per sync, no base weights, one adapter held
        assert sent == {"weight_loads": 0, "weight_tensors": 0, "adapter_loads": 3,
                        "moe_repacks": 0}
        assert held == [3] and left == ["r0_000003"]
