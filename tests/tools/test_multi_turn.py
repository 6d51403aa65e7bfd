"""The multi-turn rollout loop: token in / token out, budgets, turns, and GRPO over masked
trajectories against hand-computed values.

The engine here is scripted (it returns chosen token ids, with chosen log-probs): the point is to
control token boundaries. Its ids are built one character at a time, so decoding the text and
encoding it again gives DIFFERENT ids (checked below): a loop that rebuilt the trajectory from
text would fail these tests. The tokenizer, the sandbox and the tool are real.
"""

import math

import numpy as np
import pytest

from mindrl.tools.multi_turn import ToolRollout, apply_loss_masks, pop_tool_metrics
from mindrl.tools.registry import ToolExecutor, build_tools
from mindrl.tools.sandbox import Sandbox, SandboxLimits, SandboxPool
from mindrl.types import Rollouts, SamplingParams, pad_token_batch


@pytest.fixture(scope="module")
def tok(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True)


@pytest.fixture(scope="module")
def executor():
    pool = SandboxPool(Sandbox(SandboxLimits(timeout_s=6, memory_mb=512)), workers=2)
    ex = ToolExecutor(build_tools(["python", "user_tools:add"]), pool, workers=2)
    yield ex
    ex.close()
    pool.close()


def chars(tok, text):
    """Ids of ``text`` one character at a time (never the tokenizer's own merges)."""
    return [i for c in text for i in tok.encode(c, add_special_tokens=False)]


class ScriptedEngine:
    """Row r's k-th call returns ``scripts[r][k]`` (ids) with log-probs -(r+1)/10 - t/1000 -
    k/100. Rows are recognised by the first token after the prompt in later turns."""

    def __init__(self, scripts, prompt_len, eos):
        self.scripts, self.P, self.eos = scripts, prompt_len, eos
        self.calls = {}
        self.contexts = []

    def lp(self, r, k, n):
        return np.array([-(r + 1) / 10 - t / 1000 - k / 100 for t in range(n)], np.float32)

    def generate(self, prompt_ids, sampling):
        rows = [list(p) for p in prompt_ids for _ in range(sampling.n)]
        out_ids, out_lp, reasons = [], [], []
        for j, ctx in enumerate(rows):
            self.contexts.append(ctx)
            if len(ctx) == self.P:                      # first turn: prompt-major order
                r = j
            else:
                r = next(i for i, s in enumerate(self.scripts) if ctx[self.P] == s[0][0])
            k = self.calls.get(r, 0)
            self.calls[r] = k + 1
            ids = list(self.scripts[r][k])[:sampling.max_new_tokens]
            out_ids.append(ids)
            out_lp.append(self.lp(r, k, len(ids)))
            reasons.append("stop" if ids and ids[-1] == self.eos else "length")
        return Rollouts(rows, out_ids, out_lp, reasons,
                        np.repeat(np.arange(len(prompt_ids)), sampling.n), [])


def sp(n, budget=400, seed=3):
    return SamplingParams(n=n, temperature=1.0, max_new_tokens=budget, seed=seed)


def test_token_in_token_out_tir(tok, executor):
    eos = tok.eos_token_id
    prompt = tok.encode("Compute 1234*5678.", add_special_tokens=False)
    t0 = chars(tok, "Let me compute.\n```python\nprint(1234*5678)\n```")
    hallucinated = chars(tok, "\n```output\n99\n```")          # sampled after the call: dropped
    t1 = chars(tok, "So the answer is \\boxed{7006652}.") + [eos]
    plain = chars(tok, "I think \\boxed{12}.") + [eos]
    scripts = [[t0 + hallucinated, t1], [plain]]
    # the point of the test: decoding + re-encoding changes these ids
    assert tok.encode(tok.decode(t0), add_special_tokens=False) != t0
    engine = ScriptedEngine(scripts, len(prompt), eos)
    loop = ToolRollout(tok, executor, fmt="tir", max_turns=4, max_output_tokens=64)
    # two prompts' worth of rows: prompt 0 with n=2 -> rows 0 and 1
    ro = loop.generate(engine, [prompt], sp(n=2))

    out_ids = tok.encode("\n```output\n7006652\n```\n", add_special_tokens=False)
    assert ro.response_ids[0] == t0 + out_ids + t1
    np.testing.assert_array_equal(ro.loss_masks[0], [1] * len(t0) + [0] * len(out_ids) +
                                  [1] * len(t1))
    np.testing.assert_array_equal(ro.logprobs[0], np.concatenate(
        [engine.lp(0, 0, len(t0)), np.zeros(len(out_ids)), engine.lp(0, 1, len(t1))]))
    # every trained token is one the engine sampled, in order
    trained = [t for t, m in zip(ro.response_ids[0], ro.loss_masks[0]) if m]
    assert trained == t0 + t1
    # the second turn continued from the exact ids: prompt + t0 + output ids
    assert engine.contexts[-1] == prompt + t0 + out_ids
    assert ro.response_ids[1] == plain and ro.loss_masks[1].tolist() == [1.0] * len(plain)
    assert ro.finish_reasons == ["stop", "stop"]
    assert "\\boxed{7006652}" in ro.texts[0] and "99" not in ro.texts[0]
    m = loop.last_metrics
    assert m["tools/calls_per_sample"] == 0.5 and m["tools/turns_mean"] == 1.5
    assert m["tools/errors"] == 0 and m["tools/error_fraction"] == 0


def test_chat_format_keeps_the_eos_after_the_call(tok, executor):
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    prompt = tok.encode("Add 2 and 40.", add_special_tokens=False)
    t0 = chars(tok, '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n</tool_call>') \
        + [eos]
    t1 = chars(tok, "It is 42.") + [eos]
    engine = ScriptedEngine([[t0, t1]], len(prompt), eos)
    loop = ToolRollout(tok, executor, fmt="chat", max_turns=3, stop_token_ids=[eos])
    ro = loop.generate(engine, [prompt], sp(n=1))
    out = tok.encode("\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n"
                     "<|im_start|>assistant\n", add_special_tokens=False)
    assert ro.response_ids[0] == t0 + out + t1
    assert [t for t, m in zip(ro.response_ids[0], ro.loss_masks[0]) if m] == t0 + t1


def test_token_budget_over_all_turns_and_output_cap(tok, executor):
    eos = tok.eos_token_id
    prompt = tok.encode("go", add_special_tokens=False)
    t0 = chars(tok, "```python\nprint('ab' * 500)\n```")
    t1 = chars(tok, "done") + [eos]
    loop = ToolRollout(tok, executor, fmt="tir", max_turns=4, max_output_tokens=10)
    ro = loop.generate(ScriptedEngine([[t0, t1]], len(prompt), eos), [prompt], sp(n=1))
    n_out = len(ro.response_ids[0]) - len(t0) - len(t1)
    body = tok.encode("ab" * 500, add_special_tokens=False)[:10]
    expect = tok.encode("\n```output\n" + tok.decode(body) + "\n... (output truncated)\n```\n",
                        add_special_tokens=False)
    assert ro.response_ids[0][len(t0):len(t0) + n_out] == expect
    # a budget that ends inside the tool output: cut there, finish "length"
    budget = len(t0) + 5
    ro = loop.generate(ScriptedEngine([[t0, t1]], len(prompt), eos), [prompt],
                       sp(n=1, budget=budget))
    assert len(ro.response_ids[0]) == budget and ro.finish_reasons == ["length"]
    assert ro.loss_masks[0].tolist() == [1.0] * len(t0) + [0.0] * 5


def test_max_turns_leaves_the_last_call_as_text(tok, executor):
    eos = tok.eos_token_id
    prompt = tok.encode("go", add_special_tokens=False)
    call = chars(tok, "```python\nprint(1)\n```")
    tail = chars(tok, " then") + [eos]
    # max_turns=1: no call is run, the whole generation is kept
    loop = ToolRollout(tok, executor, fmt="tir", max_turns=1)
    ro = loop.generate(ScriptedEngine([[call + tail]], len(prompt), eos), [prompt], sp(n=1))
    assert ro.response_ids[0] == call + tail and loop.last_metrics["tools/calls_per_sample"] == 0
    # max_turns=2: one call runs; the second turn's call stays text
    loop = ToolRollout(tok, executor, fmt="tir", max_turns=2)
    ro = loop.generate(ScriptedEngine([[call, call + tail]], len(prompt), eos), [prompt],
                       sp(n=1))
    assert loop.last_metrics["tools/calls_per_sample"] == 1
    assert loop.last_metrics["tools/turns_max"] == 2
    assert ro.response_ids[0][-len(call + tail):] == call + tail


def test_tool_errors_and_timeouts_are_counted(tok, executor):
    eos = tok.eos_token_id
    prompt = tok.encode("go", add_special_tokens=False)
    bad = chars(tok, "x```python\n1/0\n```")
    slow = chars(tok, "y```python\nwhile True: pass\n```")
    end = [eos]
    loop = ToolRollout(tok, executor, fmt="tir", max_turns=3)
    ro = loop.generate(ScriptedEngine([[bad, end], [slow, end]], len(prompt), eos), [prompt],
                       sp(n=2))
    m = loop.last_metrics
    assert (m["tools/errors"], m["tools/timeouts"], m["tools/error_fraction"]) == (2, 1, 1.0)
    assert "ZeroDivisionError" in ro.texts[0] and "TimeoutError" in ro.texts[1]


def test_grpo_over_masked_multi_turn_trajectories_by_hand(tok, executor):
    """Three samples of one prompt, rewards (1, 0, 0). Row 0 called the tool (3 trained + t
    tool + 2 trained tokens), rows 1 and 2 answered directly (4 and 2 tokens). The trainer's
    log-probs on the tool tokens are garbage (+3 nats away): masked, they change nothing."""
    from algorithms import compute_advantages, get_ops, rl_loss
    from mindrl.config.schema import AlgorithmConfig

    eos = tok.eos_token_id
    prompt = tok.encode("q", add_special_tokens=False)
    call = chars(tok, "```python\nprint(7)\n```")
    scripts = [[call, chars(tok, "A") + [eos]], [chars(tok, "abc") + [eos]],
               [chars(tok, "z") + [eos]]]
    loop = ToolRollout(tok, executor, fmt="tir", max_turns=3)
    ro = loop.generate(ScriptedEngine(scripts, len(prompt), eos), [prompt], sp(n=3))
    tokens = pad_token_batch(ro.prompt_ids, ro.response_ids, 0)
    mask = apply_loss_masks(tokens.response_mask, ro)
    n_call, n_tool = len(call), len(ro.response_ids[0]) - len(call) - 2
    assert n_tool > 0 and mask.sum(1).tolist() == [n_call + 2, 4, 2]
    assert tokens.response_mask is mask            # the batch the backend trains on

    a = AlgorithmConfig()                          # grpo, ddof 1, eps 1e-6, token_mean, ppo_clip
    adv = compute_advantages("grpo", rewards=np.array([1.0, 0.0, 0.0]),
                             group_index=np.zeros(3, int), response_mask=mask,
                             std_eps=a.std_eps, std_ddof=a.std_ddof) * mask
    std = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)          # ddof = 1
    A = [(2 / 3) / (std + 1e-6), (-1 / 3) / (std + 1e-6), (-1 / 3) / (std + 1e-6)]
    for i in range(3):
        np.testing.assert_allclose(adv[i][mask[i] > 0], A[i], rtol=1e-6)
        assert not adv[i][mask[i] == 0].any()

    old = np.zeros_like(mask)
    old[:, :] = np.concatenate([ro.logprobs[0], np.zeros(mask.shape[1] - len(ro.logprobs[0]))])
    logp = old.copy()
    logp[0, n_call:n_call + n_tool] += 3.0         # garbage on tool tokens
    logp[1, :4] += math.log(1.1)                   # ratio 1.1 on row 1 (A < 0: not clipped)
    ops = get_ops("numpy")
    n = n_call + 2 + 4 + 2
    expect = {
        # token_mean: sum over trained tokens of -A * ratio / trained tokens
        "token_mean": -(A[0] * (n_call + 2) + A[1] * 1.1 * 4 + A[2] * 2) / n,
        # seq_mean_token_mean: per-row mean over its trained tokens, then mean over rows
        "seq_mean_token_mean": -(A[0] + A[1] * 1.1 + A[2]) / 3,
        # Dr. GRPO: sum over trained tokens / (rows * max_len)
        "seq_mean_token_sum_norm": -(A[0] * (n_call + 2) + A[1] * 1.1 * 4 + A[2] * 2) / (3 * 64),
    }
    for mode, value in expect.items():
        cfg = AlgorithmConfig(loss_agg_mode=mode)
        loss, _ = rl_loss(ops, logp=logp, old_logp=old, advantages=adv, response_mask=mask,
                          cfg=cfg, max_len=64)
        assert float(loss) == pytest.approx(value, rel=1e-5), mode     # float32


def _counts(samples, calls, with_calls, errors, timeouts, turns, tool_tokens, tokens, tmax):
    return dict(samples=samples, calls=calls, samples_with_calls=with_calls, errors=errors,
                timeouts=timeouts, turns=turns, tool_tokens=tool_tokens, tokens=tokens,
                turns_max=tmax)


def test_trainer_metrics_pool_the_counts_of_a_steps_parts():
    """Two generate calls of one step (dynamic sampling): 2 rows that each called once (one
    error), then 6 rows without calls; the metrics are those of the 8 rows together."""
    class T:            # one process: allsum / gather are the identity, as in Trainer
        world = 1
        allsum = staticmethod(lambda x: np.asarray(x, np.float64))
        gather = staticmethod(lambda x: x)
        _tool_metric_parts = [_counts(2, 2, 2, 1, 0, 4, 10, 30, 2),
                              _counts(6, 0, 0, 0, 0, 6, 0, 18, 1)]

    t = T()
    m = pop_tool_metrics(t)
    assert m == {"tools/calls_per_sample": 0.25, "tools/samples_with_calls": 0.25,
                 "tools/errors": 1.0, "tools/error_fraction": 0.5, "tools/timeouts": 0.0,
                 "tools/turns_mean": 1.25, "tools/turns_max": 2.0,
                 "tools/output_token_fraction": 10 / 48}
    assert pop_tool_metrics(t) == {}


def test_tool_metrics_over_ranks_are_those_of_the_pooled_rows():
    """Rank 0: 4 rows, 4 calls, no error; rank 1: 4 rows, 1 call that timed out. Reduced over
    the two ranks (sum, max), the metrics are those of 8 rows with 5 calls (not rank 0's own,
    and not the mean of the two ranks' fractions: error_fraction 1/5, not (0 + 1) / 2)."""
    from mindrl.tools.multi_turn import reduce_counts, tool_metrics

    r0 = [_counts(4, 4, 4, 0, 0, 8, 20, 60, 2)]
    r1 = [_counts(4, 1, 1, 1, 1, 5, 5, 40, 2)]
    ranks = [reduce_counts(r0), reduce_counts(r1)]
    allsum = lambda x: ranks[0] and np.add(*[[c[k] for k in  # noqa: E731
                                            ("samples", "calls", "samples_with_calls", "errors",
                                             "timeouts", "turns", "tool_tokens", "tokens")]
                                           for c in ranks])
    allmax = lambda x: np.array([max(c["turns_max"] for c in ranks)])  # noqa: E731
    m = tool_metrics(reduce_counts(r0, allsum, allmax))
    assert m == {"tools/calls_per_sample": 5 / 8, "tools/samples_with_calls": 5 / 8,
                 "tools/errors": 1.0, "tools/error_fraction": 0.2, "tools/timeouts": 1.0,
                 "tools/turns_mean": 13 / 8, "tools/turns_max": 2.0,
                 "tools/output_token_fraction": 0.25}
