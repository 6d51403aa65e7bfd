"""Partial rollouts (``rollout.partial_rollouts``): a generation interrupted at a weight update
keeps its tokens and behaviour log-probs and continues under the new weights.

Checked against an independent reference: a transformers forward over the finished sequences
under each policy. Tokens sampled before the interruption carry the old policy's log-probs,
tokens after it the new policy's; interrupting and resuming under unchanged weights gives the
uninterrupted greedy output exactly. Engines: the native torch engine and the MindSpore
sampler (interrupted between decode steps), vLLM (segments between checks); then a Ray run
whose workers are interrupted for real."""

import numpy as np
import pytest

from mindrl.config.loader import load_config
from mindrl.trainer.async_ray import sample_partial
from mindrl.types import SamplingParams

PROMPTS = [[5, 6, 7, 8, 9], [11, 12]]
T = 12


class NewerAt:
    """``newer()``: True at its ``at``-th call only (a version published then); the segment
    length for engines without an interrupt hook."""

    def __init__(self, at: int, check_tokens: int = 4):
        self.at, self.calls, self.check_tokens = at, 0, check_tokens

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls == self.at


def perturbed(named, scale=0.05, seed=0):
    """The same weights plus noise (a different policy)."""
    rng = np.random.default_rng(seed)
    return {k: (np.asarray(v, np.float32) +
                scale * rng.standard_normal(np.shape(v)).astype(np.float32))
            for k, v in named.items()}


def hf_weights(path):
    import torch
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    # parameters, not the state dict: tied embeddings appear once (perturbed once)
    return {k: v.detach().numpy().copy() for k, v in m.named_parameters()}


def reference_logprobs(path, weights, prompt, response):
    """log p(response token | prefix) at temperature 1 under ``weights`` (transformers)."""
    import torch
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    missing, unexpected = m.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()},
                                            strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        logp = torch.log_softmax(m(input_ids=ids).logits[0].float(), -1)
    P = len(prompt)
    return np.array([float(logp[P + i - 1, t]) for i, t in enumerate(response)], np.float32)


def check_resumed(engine, path, at, sampling, tol):
    """One group interrupted at decode step ``at`` and continued under perturbed weights: each
    token's log-prob is the one of the policy that sampled it, its version says which."""
    a = hf_weights(path)
    b = perturbed(a)
    loads = []

    def refresh():
        engine.load_weights(b.items())
        loads.append(1)
        return 1

    newer = NewerAt(at)
    ro, versions, resumes = sample_partial(engine, PROMPTS[0], sampling, 0, refresh, newer)
    assert resumes == 1 and loads == [1]
    assert len(ro) == sampling.n and list(ro.group_index) == [0] * sampling.n
    for i in range(sampling.n):
        resp, lp, v = ro.response_ids[i], ro.logprobs[i], versions[i]
        assert len(resp) == len(lp) == len(v) and ro.finish_reasons[i] in ("stop", "length")
        cut = int((v == 0).sum())
        assert (v[:cut] == 0).all() and (v[cut:] == 1).all()
        if ro.finish_reasons[i] == "length":
            assert len(resp) == T and cut == at, (cut, at)
        ref_a = reference_logprobs(path, a, PROMPTS[0], resp)
        ref_b = reference_logprobs(path, b, PROMPTS[0], resp)
        np.testing.assert_allclose(lp[:cut], ref_a[:cut], atol=tol)
        np.testing.assert_allclose(lp[cut:], ref_b[cut:], atol=tol)
        assert cut == len(resp) or np.abs(ref_a[cut:] - ref_b[cut:]).max() > 20 * tol
    return ro


def check_same_weights_greedy(engine, at):
    """Interrupted and resumed with no weight change: the uninterrupted greedy output."""
    sp = SamplingParams(n=1, temperature=0.0, max_new_tokens=T, seed=3)
    whole = engine.generate([PROMPTS[1]], sp)
    ro, versions, resumes = sample_partial(engine, PROMPTS[1], sp, 4, lambda: 4, NewerAt(at))
    assert resumes == 0             # interrupted, but the policy did not change: no resume
    assert ro.response_ids == whole.response_ids
    assert ro.finish_reasons == whole.finish_reasons
    np.testing.assert_allclose(ro.logprobs[0], whole.logprobs[0], atol=2e-5)
    assert (versions[0] == 4).all()


def torch_engine(path):
    from mindrl.rollout.native_torch import NativeTorchEngine

    cfg = load_config(None, [f"model.path={path}", "model.chat_template=none",
                             "model.dtype=float32"])
    engine = NativeTorchEngine.from_config(cfg, path)
    engine.model.requires_grad_(False)
    return engine


@pytest.fixture(scope="module")
def tiny_path():
    from mindrl.models.tiny import resolve_model_path

    return str(resolve_model_path("builtin:tiny"))


@pytest.mark.slow
def test_decode_loop_stops_live_rows_at_the_interrupt(tiny_path):
    """The torch decode loop ends the rows still decoding with reason "interrupted" after the
    step where ``interrupt`` says so; rows that already stopped keep "stop"."""
    engine = torch_engine(tiny_path)
    sp = SamplingParams(n=3, temperature=1.0, max_new_tokens=T, seed=1)
    ro = engine.generate([PROMPTS[0]], sp, interrupt=NewerAt(5))
    for ids, reason in zip(ro.response_ids, ro.finish_reasons):
        assert reason in ("interrupted", "stop")
        assert len(ids) == 5 if reason == "interrupted" else len(ids) <= 5


def test_torch_engine_resumes_under_the_new_weights(tiny_path):
    engine = torch_engine(tiny_path)
    check_resumed(engine, tiny_path, 5,
                  SamplingParams(n=3, temperature=1.0, max_new_tokens=T, seed=1), 2e-5)
    check_same_weights_greedy(torch_engine(tiny_path), 4)


class Segments:
    """The torch engine driven as vLLM is: no interrupt hook, so the generation runs in
    segments of ``check_tokens`` tokens with a look for a newer policy after each."""

    def __init__(self, engine):
        self.engine, self.tokenizer, self.calls = engine, engine.tokenizer, 0

    def generate(self, prompt_ids, sampling):
        self.calls += 1
        return self.engine.generate(prompt_ids, sampling)


@pytest.mark.parametrize("new_at", [0, 2])
def test_segments_without_a_new_policy_are_not_resumes(tiny_path, new_at):
    # 12 tokens in segments of 3: 3 or more segment boundaries; a new version is published
    # at the new_at-th look only (0: never): that many resumes, not one per segment
    eng = Segments(torch_engine(tiny_path))
    sp = SamplingParams(n=2, temperature=1.0, max_new_tokens=T, seed=1)
    looks = []

    def refresh():
        looks.append(1)
        return 1 if new_at and len(looks) >= new_at else 0

    ro, versions, resumes = sample_partial(eng, PROMPTS[0], sp, 0, refresh,
                                           NewerAt(0, check_tokens=3))
    assert all(len(r) == T for r in ro.response_ids), ro.response_lengths
    assert eng.calls == 4 and len(looks) == 3, (eng.calls, looks)
    assert resumes == (1 if new_at else 0), resumes
    for v in versions:
        want = np.zeros(T, np.int64) if not new_at else (np.arange(T) >= 3 * new_at)
        np.testing.assert_array_equal(v, want.astype(np.int64))


@pytest.mark.slow
def test_mindspore_sampler_resumes_under_the_new_weights(tmp_path, tiny_path):
    """The rollout worker's MindSpore sampler: the resumed prompts (prompt + tokens so far) fit
    its prompt buckets, the log-probs follow the policy of each token."""
    from mindrl.trainer.async_ray import worker_engine

    cfg = load_config(None, [f"model.path={tiny_path}", "model.chat_template=none",
                             "backend=mindspore", "rollout.mode=async_ray",
                             "rollout.partial_rollouts=true", f"rollout.max_new_tokens={T}",
                             f"logging.output_dir={tmp_path}"])
    engine = worker_engine(cfg, tiny_path)
    assert type(engine).__name__ == "MindSporeSampler"
    check_resumed(engine, tiny_path, 5,
                  SamplingParams(n=3, temperature=1.0, max_new_tokens=T, seed=1), 1e-4)
    check_same_weights_greedy(worker_engine(cfg, tiny_path), 4)


@pytest.mark.slow
def test_vllm_engine_resumes_in_segments(tmp_path, tiny_path):
    """vLLM has no interrupt hook: the worker generates segments of ``check_tokens`` tokens and
    looks for a newer policy in between; a resumed segment runs with the new weights."""
    from mindrl.trainer.async_ray import worker_engine

    cfg = load_config(None, [f"model.path={tiny_path}", "model.chat_template=none",
                             "rollout.engine=vllm", "rollout.mode=async_ray",
                             "rollout.partial_rollouts=true", f"rollout.max_new_tokens={T}",
                             f"logging.output_dir={tmp_path}"])
    engine = worker_engine(cfg, tiny_path)
    try:
        sp = SamplingParams(n=2, temperature=1.0, max_new_tokens=T, seed=1)
        a = hf_weights(tiny_path)
        b = perturbed(a)
        checks = []

        def refresh():          # asked after each 4-token segment; version 1 from the 2nd
            checks.append(1)
            if len(checks) == 2:
                engine.load_weights(b.items())
            return int(len(checks) >= 2)

        ro, versions, resumes = sample_partial(engine, PROMPTS[0], sp, 0, refresh,
                                               NewerAt(0, check_tokens=4))
        # one new version (at the 2nd check): one resume, however many segments ran
        assert resumes == 1 and len(checks) >= 2, (resumes, len(checks), ro.response_lengths)
        for i in range(2):
            v, resp = versions[i], ro.response_ids[i]
            assert (v[:8] == 0).all() and (v[8:] == 1).all()
            if ro.finish_reasons[i] == "length":
                assert len(resp) == T
            cut = int((v == 0).sum())
            np.testing.assert_allclose(
                ro.logprobs[i][:cut], reference_logprobs(tiny_path, a, PROMPTS[0], resp)[:cut],
                atol=2e-4)
            np.testing.assert_allclose(
                ro.logprobs[i][cut:], reference_logprobs(tiny_path, b, PROMPTS[0], resp)[cut:],
                atol=2e-4)
    finally:
        engine.close()


def test_partial_needs_async_ray():
    from mindrl.config.schema import ConfigError

    with pytest.raises(ConfigError, match="rollout.partial_rollouts=true .* needs "
                                          "rollout.mode=async_ray"):
        load_config(None, ["rollout.partial_rollouts=true"])
    with pytest.raises(ConfigError, match="rollout.partial_check_tokens=0 must be >= 1"):
        load_config(None, ["rollout.mode=async_ray", "rollout.partial_rollouts=true",
                           "rollout.partial_check_tokens=0"])



def slow_forward(model):
    """A rollout worker's model takes 3 ms more per forward: generations are still running when
    the trainer publishes its next weights (a worker setup hook)."""
    import time

    model.register_forward_pre_hook(lambda *_: time.sleep(0.003))


@pytest.mark.slow
def test_workers_resume_generations_across_weight_pushes(tmp_path):
    """A Ray run (torch backend, 2 workers, max_staleness 1) with partial rollouts: generations
    in flight at a push are interrupted and resumed (rollout/resumes), every token lags at most
    as much as the group it belongs to (rollout/token_staleness <= rollout/staleness), the bound
    holds, and batches whose tokens are all of the current policy score as the trainer does."""
    from mindrl.trainer.rl import RLTrainer

    class Slow(RLTrainer):
        rollout_worker_setup = staticmethod(slow_forward)

    steps = 6
    cfg = load_config(None, [
        "model.path=builtin:tiny", "model.chat_template=none",
        "data.train_file=arithmetic:digits=2,ops=+", "rollout.n=4", "rollout.max_new_tokens=24",
        "train.prompts_per_step=4", "train.micro_batch_size=8", "train.lr=5e-3",
        f"train.steps={steps}", "reward.num_workers=0",
        "reward.functions=[{name: 'trainer_helpers:digit_share_reward'}]",
        "checkpoint.save_final=false", "validation.every=0", "rollout.mode=async_ray",
        "rollout.workers=2", "rollout.max_staleness=1", "rollout.partial_rollouts=true",
        "rollout.partial_check_tokens=1", "logging.tensorboard=false",
        "logging.progress_bar=false", "logging.plot=false", f"logging.output_dir={tmp_path}"])
    tr = Slow(cfg)
    try:
        tr.fit()
    finally:
        tr.close()
    from mindrl.trainer.logger import read_metrics

    m = [r for r in read_metrics(tmp_path) if "reward/mean" in r]
    print("\nresumes by step", [r["rollout/resumes"] for r in m], "token staleness",
          [round(r["rollout/token_staleness"], 3) for r in m], "staleness",
          [round(r["rollout/staleness"], 3) for r in m])
    assert len(m) == steps
    assert sum(r["rollout/resumes"] for r in m) > 0
    assert all(r["rollout/staleness_max"] <= 1 for r in m)
    for r in m:
        assert 0 <= r["rollout/token_staleness"] <= 1
        assert r["rollout/resumed_groups"] <= r["rollout/resumes"]
        if r["rollout/token_staleness"] == 0:
            assert r["rollout/logprob_gap_mean"] < 1e-4
