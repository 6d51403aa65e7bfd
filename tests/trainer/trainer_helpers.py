"""Rewards used by the trainer tests (importable by dotted path: trainer_helpers:...)."""


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
