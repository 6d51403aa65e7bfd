"""Options the MindSpore backend honours: model.gradient_checkpointing (Cell.recompute on every
decoder layer: the same loss and gradients, recompute set on the layers) and
reward.overlap_groups (the sampler reports each group once all of its samples stopped, and the
samples are those of a call without the report)."""

import numpy as np
import pytest

from mindrl.backends.mindspore import MindSporeBackend
from mindrl.types import LossNormalizers, SamplingParams
from ms_helpers import VOCAB, ms_config, random_batch, split


def _recompute_flags(model):
    return [bool(getattr(layer, "_has_config_recompute", False)) for layer in model.model.layers]


@pytest.mark.slow
def test_gradient_checkpointing_same_loss_and_gradients_recompute_on_every_layer(hf_untied):
    directory, _ = hf_untied
    rng = np.random.default_rng(0)
    batch = random_batch(rng, 8, old=True, ref=True)
    norm = LossNormalizers(global_tokens=float(batch.tokens.response_mask.sum()),
                           global_seqs=8.0, max_len=16.0)
    grads, losses, flags = {}, {}, {}
    for on in (False, True):
        be = MindSporeBackend(ms_config(f"model.gradient_checkpointing={str(on).lower()}",
                                        "algorithm.kl.coef=0.05", "algorithm.entropy_coef=0.01"),
                              model_path=directory)
        flags[on] = _recompute_flags(be.model)
        grads[on] = be.gradients(split(batch, 4), norm)
        losses[on] = be.train_step(split(batch, 4), norm)["loss"]
        assert be.train_mode == "fused"            # the compiled step, not the fallback
    assert flags == {False: [False, False], True: [True, True]}
    assert grads[True].keys() == grads[False].keys()
    scale = max(float(np.abs(g).max()) for g in grads[False].values())
    assert scale > 1e-3                                  # a real gradient to compare
    for name, g in grads[False].items():
        np.testing.assert_allclose(grads[True][name], g, atol=1e-5, rtol=0, err_msg=name)
    assert abs(losses[True] - losses[False]) < 1e-5


def test_gradient_checkpointing_covers_lora_adapters_and_leaves_the_reference(hf_untied):
    """Recompute is set after the adapters exist, so their cells are inside the marked layers;
    the frozen reference model is not marked."""
    directory, _ = hf_untied
    be = MindSporeBackend(ms_config("model.gradient_checkpointing=true", "model.lora.enabled=true"),
                          model_path=directory)
    from mindrl.backends.mindspore.lora import LoRALinear

    layer = be.model.model.layers[0]
    adapted = [c for _, c in layer.cells_and_names() if isinstance(c, LoRALinear)]
    assert adapted, "no LoRA cell found inside the layer"
    assert all(getattr(c, "_has_config_recompute", False) for c in adapted)
    be2 = MindSporeBackend(ms_config("model.gradient_checkpointing=true",
                                     "algorithm.kl.coef=0.05"),
                           model_path=directory, with_reference=True)
    assert _recompute_flags(be2.model) == [True, True]
    assert _recompute_flags(be2.reference) == [False, False]


@pytest.mark.slow
def test_sampler_reports_each_finished_group_once_with_unchanged_samples(hf_untied):
    from mindrl.trainer.overlap import reports_groups

    directory, _ = hf_untied
    be = MindSporeBackend(ms_config(), model_path=directory)
    eng = be.native_engine()
    assert reports_groups(eng)
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12], [20], [30, 31]]
    # a third of the vocabulary stops a sample: groups finish at different steps
    sp = SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=3,
                        stop_token_ids=tuple(range(0, VOCAB, 3)))
    reported = []
    ro = eng.generate(prompts, sp, on_group_done=lambda g, r: reported.append((g, r)))
    plain = eng.generate(prompts, sp)
    assert ro.response_ids == plain.response_ids            # the report changes no sample
    groups = [g for g, _ in reported]
    assert len(groups) == len(set(groups))                   # each group at most once
    longest = max(len(r) for r in ro.response_ids)
    early = 0
    for g, responses in reported:
        assert responses == ro.response_ids[2 * g:2 * g + 2]
        assert all(ro.finish_reasons[i] == "stop" for i in (2 * g, 2 * g + 1))
        early += max(len(r) for r in responses) < longest    # reported mid-generation
    stopped = [g for g in range(len(prompts))
               if all(ro.finish_reasons[i] == "stop" for i in (2 * g, 2 * g + 1))]
    assert sorted(groups) == stopped                         # every finished group reported
    assert early >= 1


def test_gradient_checkpointing_reaches_the_ppo_critic(hf_untied):
    directory, _ = hf_untied
    flags = {}
    for on in (False, True):
        be = MindSporeBackend(ms_config(f"model.gradient_checkpointing={str(on).lower()}",
                                        "algorithm.adv_estimator=gae"), model_path=directory)
        assert be.critic is not None
        flags[on] = (_recompute_flags(be.model), _recompute_flags(be.critic.model))
    assert flags == {False: ([False, False], [False, False]),
                     True: ([True, True], [True, True])}
