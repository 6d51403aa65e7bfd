"""Adaptive entropy control in the RL loop (torch backend, tiny model): the coefficient each
step used, by hand, and a run stopped after step 2 and resumed equal to an uninterrupted one
(the controller's state is in the checkpoint)."""

import pytest

from test_rl_loop import cfg_for, rows
from trainer_helpers import fit_stopped_by_sigterm

# target 10 nats: the tiny model's entropy (< log 1024 = 6.9) is always below it, so the
# coefficient climbs by delta every step until max_coef: 0, 0.01, 0.02, 0.025 (clipped)
CONTROL = ["backend=torch", "train.steps=4", "checkpoint.every=100", "rollout.temperature=1.0",
           "algorithm.entropy_control.enabled=true", "algorithm.entropy_control.target=10",
           "algorithm.entropy_control.delta=0.01", "algorithm.entropy_control.max_coef=0.025"]


@pytest.mark.slow
def test_coefficient_sequence_and_exact_resume(tmp_path, monkeypatch):
    from mindrl.trainer.rl import RLTrainer

    full = tmp_path / "full"
    tr = RLTrainer(cfg_for(full, *CONTROL))
    tr.fit()
    tr.close()
    a = rows(full)
    assert [r["entropy_control/coef"] for r in a] == pytest.approx([0.0, 0.01, 0.02, 0.025])
    assert [r["entropy_control/next_coef"] for r in a] == pytest.approx(
        [0.01, 0.02, 0.025, 0.025])

    part = tmp_path / "part"
    tr = RLTrainer(cfg_for(part, *CONTROL))
    fit_stopped_by_sigterm(tr, monkeypatch)   # SIGTERM during the 2nd step: checkpoint at 2
    tr = RLTrainer(cfg_for(part, *CONTROL))
    tr.fit()
    tr.close()
    b = rows(part)
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for key in ("entropy_control/coef", "entropy", "loss", "grad_norm"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-7), (ra["step"], key)
