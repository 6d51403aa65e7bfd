"""The decoder families beside Qwen2 on the MindSpore backend (Qwen3 dense, Llama 3.x with
RoPE scaling, bias flags, Qwen3-MoE, Qwen2-MoE with a shared expert): chosen from config.json,
refused in one line when unknown, and equal to transformers -- log-probs, GRPO gradients, greedy samples, checkpoints both ways,
LoRA steps, and one GRPO step end to end."""

import json
import os
import shutil

import numpy as np
import pytest
import torch

import mindspore as ms

from mindrl.backends.mindspore import arch
from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.model import Qwen2ForCausalLM, Qwen2Spec
from mindrl.errors import UserError
from mindrl.models.moe import unfuse_experts
from mindrl.types import SamplingParams, pad_token_batch
from ms_helpers import FAMILY_CASES, VOCAB, make_family_model, ms_config, random_batch
from test_ms_train import _assert_grads_close, _norm, _torch_loss_and_grads, _with_old_logp


@pytest.fixture(scope="module", params=sorted(FAMILY_CASES))
def family(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    return request.param, str(d), make_family_model(d, request.param, seed=2)


# ------------------------------------------------------------------ selection (no weights)
def test_unknown_model_type_is_one_line_naming_it_and_the_supported_list(tmp_path):
    cfg = json.loads(json.dumps({"model_type": "gemma3", "architectures": ["Gemma3ForCausalLM"],
                                 "vocab_size": 8, "hidden_size": 64, "intermediate_size": 8,
                                 "num_hidden_layers": 1, "num_attention_heads": 2}))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from mindrl.backends.mindspore import MindSporeBackend

    with pytest.raises(arch.UnsupportedArchitecture) as e:      # no weights in the directory
        MindSporeBackend(ms_config(), model_path=str(tmp_path))
    msg = str(e.value)
    assert isinstance(e.value, UserError)        # `mindrl train` prints one line, exits 2
    assert "\n" not in msg and "'gemma3'" in msg
    assert "llama, qwen2, qwen2_moe, qwen3, qwen3_moe" in msg
    with pytest.raises(arch.UnsupportedArchitecture, match="'longrope'"):
        Qwen2Spec.from_hf({**cfg, "model_type": "llama",
                           "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}})
    # configs without model_type fall back to architectures[0]
    assert arch.model_type_of({"architectures": ["Qwen3ForCausalLM"]}) == "qwen3"


ROPE_CASES = {
    "linear": dict(rope_type="linear", factor=4.0),
    "dynamic": dict(rope_type="dynamic", factor=2.0),
    "yarn": dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16),
    "yarn_mscale": dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=32,
                        mscale=1.0, mscale_all_dim=0.5, beta_fast=16, truncate=False),
    "llama3": dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=16),
}


@pytest.mark.parametrize("case", sorted(ROPE_CASES))
def test_rope_frequencies_equal_transformers(case):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {**ROPE_CASES[case], "rope_theta": 50000.0}
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=2, head_dim=32,
                      max_position_embeddings=64, rope_parameters=dict(params))
    want, want_scale = ROPE_INIT_FUNCTIONS[params["rope_type"]](cfg)
    got, scale, limit = arch.rope_frequencies(cfg.to_dict(), 32)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)
    assert scale == pytest.approx(float(want_scale), rel=1e-7)
    assert not np.allclose(got, arch.rope_frequencies(
        {"rope_parameters": {"rope_theta": 50000.0}}, 32)[0]) or case == "dynamic"
    assert limit == (64 if case == "dynamic" else None)


# ------------------------------------------------------------------ fidelity per family
def _hf_response_logp(hf, tb, temperature=1.0):
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor(tb.input_ids),
                    attention_mask=torch.tensor(tb.attention_mask),
                    position_ids=torch.tensor(tb.position_ids)).logits[:, tb.prompt_len - 1:-1]
        lp = torch.log_softmax(logits / temperature, -1)
    return torch.gather(lp, -1, torch.tensor(tb.input_ids[:, tb.prompt_len:]).unsqueeze(-1)
                        ).squeeze(-1).numpy() * tb.response_mask


@pytest.mark.slow
def test_family_matches_transformers(family, tmp_path):
    """One backend per family: parameter names, log-probs (1e-4), GRPO gradients (1e-4
    relative), greedy samples == generate, critic values (1e-4), and a checkpoint that
    transformers loads exactly."""
    from mindrl.backends.mindspore import MindSporeBackend

    case, directory, hf = family
    be = MindSporeBackend(ms_config("data.max_prompt_len=32"), model_path=directory)
    spec = be.spec
    assert spec.model_type == W.read_config(directory)["model_type"]
    names = {p.name for p in be.model.get_parameters()}
    on_disk = {k for k, _ in W.iter_checkpoint(directory)}      # MoE: per-expert names
    want = on_disk - ({"lm_head.weight"} if hf.config.tie_word_embeddings else set())
    assert names == want
    # log-probs, prompts long enough to cross llama3's original context of 16
    rng = np.random.default_rng(1)
    prompts = [list(rng.integers(1, VOCAB, n)) for n in (3, 19, 11)]
    resps = [list(rng.integers(1, VOCAB, n)) for n in (9, 4, 12)]
    tb = pad_token_batch(prompts, resps, 0)
    np.testing.assert_allclose(be.logprobs(tb, temperature=1.0) * tb.response_mask,
                               _hf_response_logp(hf, tb), atol=1e-4)
    # GRPO loss gradients vs torch (old log-probs perturbed: ratios off 1, clips bind)
    batch = _with_old_logp(random_batch(rng, 4, max_prompt=18), hf, rng)
    got = be.gradients([batch], _norm(batch))
    ref_model = type(hf).from_pretrained(directory).float()
    _, ref = _torch_loss_and_grads(ref_model, batch, be.cfg, _norm(batch))
    ref = dict(unfuse_experts(ref.items()))          # transformers' fused experts, per expert
    assert set(got) == set(ref) - ({"lm_head.weight"} if hf.config.tie_word_embeddings
                                   else set())
    _assert_grads_close(got, ref)
    # greedy samples (native engine, static KV cache) == transformers generate
    eng = be.native_engine()
    for p in prompts[1:2]:                                 # 19 tokens + 12
        ro = eng.generate([p], SamplingParams(n=1, temperature=0.0, max_new_tokens=12))
        with torch.no_grad():
            out = hf.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p),
                              dtype=torch.long), max_new_tokens=12, do_sample=False,
                              pad_token_id=0)
        assert ro.response_ids[0] == out[0, len(p):].tolist(), case
    # sampled tokens' log-probs (host-side RoPE tables in decode) == the trainer's
    ro = eng.generate(prompts, SamplingParams(n=1, temperature=1.0, max_new_tokens=8, seed=0))
    lp = be.logprobs(pad_token_batch(ro.prompt_ids, ro.response_ids, 0), temperature=1.0)
    for i, r in enumerate(ro.response_ids):
        np.testing.assert_allclose(ro.logprobs[i], lp[i, :len(r)], atol=1e-4)
    # the PPO critic's decoder is the family's: V = score(final hidden state), as torch
    from mindrl.backends.critic_files import fresh_head
    from mindrl.backends.mindspore.critic import Qwen2ValueModel

    critic = Qwen2ValueModel(spec)
    head = fresh_head(spec.hidden_size, 0.5, 0)
    W.load_into(critic, [*((k, v) for k, v in W.iter_checkpoint(directory)
                           if k.startswith("model.")), *head.items()])
    values = critic.response_values(ms.Tensor(tb.input_ids, ms.int32),
                                    ms.Tensor(tb.position_ids, ms.int32),
                                    ms.Tensor(tb.attention_mask, ms.float32),
                                    tb.response_len).asnumpy()
    with torch.no_grad():
        h = hf.model(input_ids=torch.tensor(tb.input_ids),
                     attention_mask=torch.tensor(tb.attention_mask),
                     position_ids=torch.tensor(tb.position_ids)).last_hidden_state.numpy()
    want = h[:, tb.prompt_len - 1:-1] @ head["score.weight"][0] + head["score.bias"][0]
    np.testing.assert_allclose(values * tb.response_mask, want * tb.response_mask, atol=1e-4)
    # checkpoint out: transformers loads it with exactly these weights
    out_dir = tmp_path / "saved"
    W.write_checkpoint(str(out_dir), be.named_weights())
    shutil.copy(os.path.join(directory, "config.json"), out_dir / "config.json")
    back = type(hf).from_pretrained(str(out_dir)).float()
    for name, t in back.state_dict().items():
        np.testing.assert_array_equal(t.numpy(), hf.state_dict()[name].numpy(), err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["linear", "dynamic", "yarn_mscale"])
def test_scaled_rope_logprobs_match_transformers(case, tmp_path):
    params = {**ROPE_CASES[case], "rope_theta": 50000.0}
    hf = make_family_model(tmp_path, "llama3", seed=3, rope_parameters=params)
    net = Qwen2ForCausalLM(Qwen2Spec.from_hf(W.read_config(str(tmp_path))))
    W.load_into(net, W.iter_checkpoint(str(tmp_path)))
    rng = np.random.default_rng(2)
    tb = pad_token_batch([list(rng.integers(1, VOCAB, n)) for n in (4, 21)],
                         [list(rng.integers(1, VOCAB, n)) for n in (10, 6)], 0)
    T = tb.response_len

    @ms.jit
    def logits(ids, pos, att):
        return net.response_logits(ids, pos, att, T)

    z = logits(ms.Tensor(tb.input_ids, ms.int32), ms.Tensor(tb.position_ids, ms.int32),
               ms.Tensor(tb.attention_mask, ms.float32)).asnumpy()
    lp = torch.log_softmax(torch.tensor(z), -1)
    lp = torch.gather(lp, -1, torch.tensor(tb.input_ids[:, tb.prompt_len:]).unsqueeze(-1))
    np.testing.assert_allclose(lp.squeeze(-1).numpy() * tb.response_mask,
                               _hf_response_logp(hf, tb), atol=1e-4)


def test_dynamic_rope_refuses_sequences_beyond_max_positions(tmp_path):
    hf = make_family_model(tmp_path, "llama3", rope_parameters=dict(
        rope_type="dynamic", factor=2.0, rope_theta=1e4), max_position_embeddings=16)
    net = Qwen2ForCausalLM(Qwen2Spec.from_hf(W.read_config(str(tmp_path))))
    ids = np.ones((1, 17), np.int32)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        net(ms.Tensor(ids), ms.Tensor(np.arange(17, dtype=np.int32)[None]),
            ms.Tensor(np.ones((1, 17), np.float32)))
    del hf


# ------------------------------------------------------------------ LoRA and the RL loop
@pytest.mark.slow
def test_lora_step_on_qwen3_trains_adapters_only(tmp_path):
    from mindrl.backends.mindspore import MindSporeBackend
    from mindrl.backends.mindspore.lora import adapter_arrays, base_arrays
    from mindrl.types import LossNormalizers

    hf = make_family_model(tmp_path, "qwen3", seed=4)
    be = MindSporeBackend(ms_config("model.lora.enabled=true", "model.lora.rank=4",
                                    "model.lora.alpha=8", "train.lr=1e-2", "train.grad_clip=0"),
                          model_path=str(tmp_path))
    assert len(be.params) == 2 * 7 * 2       # A and B for 7 targets x 2 layers
    batch = random_batch(np.random.default_rng(5), 4)
    m = batch.tokens.response_mask
    norm = LossNormalizers(float(m.sum()), 4.0, float(m.shape[1]))
    # adapters on at init (B = 0): the policy is the base, as transformers computes it
    np.testing.assert_allclose(be.logprobs(batch.tokens, temperature=1.0) * m,
                               _hf_response_logp(hf, batch.tokens), atol=1e-4)
    w0, a0 = dict(base_arrays(be.model)), dict(adapter_arrays(be.model))
    out = be.train_step([batch], norm)
    assert out["grad_norm"] > 0 and out["update_skipped"] == 0
    for k, v in base_arrays(be.model):
        np.testing.assert_array_equal(v, w0[k])
    moved = [k for k, v in adapter_arrays(be.model) if not np.array_equal(v, a0[k])]
    assert any(".q_proj.lora_B" in k for k in moved) and any("mlp" in k for k in moved)


def length_reward(completions, **_):
    """Longer completions score higher: the groups' rewards differ, so advantages are not 0."""
    return [len(text) / 10.0 for text in completions]


E2E = ["model.chat_template=none", "data.train_file=arithmetic:digits=2,ops=+",
       "data.max_val_samples=8", "rollout.n=4", "rollout.max_new_tokens=8",
       "train.prompts_per_step=2", "train.micro_batch_size=8", "train.lr=1e-3",
       "reward.num_workers=0", "reward.functions=[{name: 'test_ms_families:length_reward'}]",
       "train.steps=1",
       "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
       "checkpoint.save_final=false", "backend=mindspore"]


@pytest.mark.slow
# tiny-qwen3-moe without LoRA: dapo_qwen3_moe_smoke (test_recipe_smoke) runs that on MindSpore
@pytest.mark.parametrize("model, lora", [("tiny-qwen3", False), ("tiny-llama", True),
                                         ("tiny-qwen3-moe", True)])
def test_one_grpo_step_end_to_end(model, lora, tmp_path):
    """`mindrl train` on the family's builtin model (tokenizer + weights) with backend=mindspore
    and the native engine: one GRPO step updates the weights (LoRA: the adapters only)."""
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.rl import RLTrainer

    path = resolve_model_path(f"builtin:{model}", cache_dir=str(tmp_path / "cache"))
    extra = ["model.lora.enabled=true", "model.lora.rank=4", "model.lora.alpha=8"] if lora else []
    cfg = load_config(None, E2E + [f"model.path={path}", f"logging.output_dir={tmp_path / 'run'}",
                                   *extra])
    tr = RLTrainer(cfg)
    before = {k: v.copy() for k, v in tr.backend.named_weights()}
    tr.fit()
    after = dict(tr.backend.named_weights())
    tr.close()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1] and rows[0]["grad_norm"] > 0
    assert np.isfinite(rows[0]["loss"])
    assert rows[0]["rollout/logprob_gap_mean"] < 1e-4      # native sampler vs trainer
    changed = [k for k in before if not np.array_equal(before[k], after[k])]
    assert any("layers.1.self_attn.q_proj" in k for k in changed), changed
    if not lora:
        assert len(changed) == len(before)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen3-moe"])  # tiny-qwen3 passes too
def test_vllm_rollouts_agree_with_the_mindspore_trainer(model, tmp_path):
    """rollout.engine=vllm (an independent implementation of the family) with the MindSpore
    trainer: after each weight sync the rollout log-probs equal the trainer's."""
    from mindrl.config.loader import load_config
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.rl import RLTrainer

    path = resolve_model_path(f"builtin:{model}", cache_dir=str(tmp_path / "cache"))
    cfg = load_config(None, E2E + [f"model.path={path}", "rollout.engine=vllm",
                                   "train.steps=2", "train.lr=1e-2",
                                   f"logging.output_dir={tmp_path / 'run'}"])
    tr = RLTrainer(cfg)
    tr.fit()
    tr.close()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for r in rows:          # step 2 samples from the synced weights after an lr=1e-2 step
        assert r["rollout/logprob_gap_mean"] < 1e-4, r["rollout/logprob_gap_mean"]
        assert r["grad_norm"] > 0
