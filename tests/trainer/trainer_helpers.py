"""Rewards used by the trainer tests (importable by dotted path: trainer_helpers:...), and checks
shared by their runs."""


def parity_reward(completions, problem, **_):
    """Problems whose first digit is even get 1.0 whatever the completion (their groups are
    uninformative); the others get 1.0 for an even-length completion, else 0.0."""
    out = []
    for text, prob in zip(completions, problem):
        if int(prob[0]) % 2 == 0:
            out.append(1.0)
        else:
            out.append(float(len(text) % 2 == 0))
    return out


def fit_stopped_by_sigterm(trainer, monkeypatch, after_step: int = 1):
    """``trainer.fit()`` with a SIGTERM sent once step ``after_step`` has run (so it arrives
    during the next step, which checkpoints and exits); returns the ``SystemExit``."""
    import os
    import signal

    import pytest

    from mindrl.trainer.rl import RLTrainer

    original = RLTrainer.run_step

    def run_step_then_sigterm(self):
        out = original(self)
        if self.step == after_step:
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(RLTrainer, "run_step", run_step_then_sigterm)
    try:
        with pytest.raises(SystemExit) as e:
            trainer.fit()
    finally:
        monkeypatch.setattr(RLTrainer, "run_step", original)
    trainer.close()
    return e.value


def hang_reward(completions, completion_lengths=(), **_):
    """On rollouts, never returns: touches the file named by ``MINDRL_TEST_HANG_MARKER`` (so a
    test knows a step is under way), then sleeps in a loop (a step that never ends). The
    preflight's call (empty completions of length 0) gets 0.0."""
    import os
    import time
    from pathlib import Path

    if not any(completions) and not any(completion_lengths):
        return [0.0] * len(completions)
    Path(os.environ["MINDRL_TEST_HANG_MARKER"]).touch()
    while True:
        time.sleep(0.05)


def pause_reward(completions, completion_lengths=(), **columns):
    """On rollouts: touches the file named by ``MINDRL_TEST_HANG_MARKER``, waits until the file
    named by ``MINDRL_TEST_RELEASE`` exists (so a test can signal the run mid-step), then pays
    0.0. The preflight's call (empty completions) gets 0.0 at once."""
    import os
    import time
    from pathlib import Path

    if not any(completions) and not any(completion_lengths):
        return [0.0] * len(completions)
    Path(os.environ["MINDRL_TEST_HANG_MARKER"]).touch()
    while not Path(os.environ["MINDRL_TEST_RELEASE"]).exists():
        time.sleep(0.05)
    return [0.0] * len(completions)


def check_demo_run(run_dir, result, sft_steps, grpo_steps, first_sft_loss, loss_ratio):
    """What a short demo run must show (see the module docstring), measured for its seed: SFT
    loss from ``first_sft_loss`` at step 1 down to below ``loss_ratio`` of it at the last step,
    falling at every step; the table's accuracies are the GRPO run's step-0 and last
    validation; no GRPO sample is rewarded, so no GRPO update moves the weights."""
    import pytest

    from mindrl.trainer.logger import read_metrics

    sft = [r for r in read_metrics(run_dir / "sft") if r["step"] > 0]
    losses = [r["loss"] for r in sft]
    assert [r["step"] for r in sft] == list(range(1, sft_steps + 1))
    assert losses[0] == pytest.approx(first_sft_loss, abs=2e-3), losses
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < loss_ratio * losses[0], losses
    grpo = read_metrics(run_dir / "grpo")
    val = [r for r in grpo if r.get("val/accuracy") is not None]
    assert [r["step"] for r in val] == [0, grpo_steps]
    assert (result["sft_accuracy"], result["rl_accuracy"]) == (val[0]["val/accuracy"],
                                                                val[-1]["val/accuracy"]) == (0, 0)
    steps = [r for r in grpo if r["step"] > 0 and "reward/mean" in r]
    assert [r["step"] for r in steps] == list(range(1, grpo_steps + 1))
    assert all(r["reward/mean"] == 0 and r["grad_norm"] == 0 for r in steps), steps


def digit_share_reward(completions, **_):
    """The share of a completion's characters that are digits (0.0 for an empty one): a dense
    reward that an untrained model earns a little of and a learning one quickly more."""
    return [sum(c.isdigit() for c in text) / len(text) if text else 0.0 for text in completions]


def constant_reward(completions, **_):
    """1 for every completion: every group ties, so every advantage (and gradient) is zero."""
    return [1.0] * len(completions)
