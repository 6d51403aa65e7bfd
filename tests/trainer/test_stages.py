"""Multi-stage recipes (mindrl.config.stages, mindrl.trainer.stages): stage 2 starts from stage
1's final weights, a run killed in stage 2 and restarted equals an uninterrupted one, and a bad
key in stage 2 stops the run before stage 1 starts."""

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from mindrl.cli import main

TOP = """\
model: {path: "builtin:tiny", chat_template: none}
data: {train_file: "arithmetic:digits=2,ops=+", max_val_samples: 16}
rollout: {n: 4, max_new_tokens: 4, temperature: 1.0}
train: {prompts_per_step: 4, micro_batch_size: 8, lr: 1.0e-3, steps: 2}
reward:
  num_workers: 0
  functions: [{name: "trainer_helpers:parity_reward"}]
logging: {tensorboard: false, progress_bar: false, plot: false, output_dir: "OUT"}
"""
STAGES = """\
stages:
  - name: warm
  - name: hot
    train: {steps: 3, lr: 5.0e-4}
    checkpoint: {every: 1}
"""
# stage "hot" written out by hand as a one-stage recipe (the runner's merge done independently)
HOT = TOP.replace("steps: 2}", "steps: 3}").replace("lr: 1.0e-3", "lr: 5.0e-4") + \
    "checkpoint: {every: 1}\n"


def write(path: Path, text: str, out: Path) -> str:
    path.write_text(text.replace("OUT", str(out)))
    return str(path)


def final_weights(run_dir: Path, steps: int):
    from safetensors.numpy import load_file

    model = run_dir / "checkpoints" / f"step_{steps:06d}" / "model"
    out = {}
    for f in sorted(model.glob("*.safetensors")):
        out.update(load_file(str(f)))
    assert out, f"no weights in {model}"
    return out


def assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)


def differs(a, b) -> bool:
    return any(not np.allclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)


def test_bad_key_in_stage_2_is_reported_before_stage_1_starts(tmp_path, capsys):
    out = tmp_path / "run"
    bad = STAGES.replace("steps: 3, lr", "stepz: 3, lr")
    recipe = write(tmp_path / "r.yaml", TOP + bad, out)
    assert main(["train", recipe]) == 2
    err = capsys.readouterr().err
    assert "stage 2 'hot'" in err and "train.stepz" in err and "did you mean 'train.steps'" in err
    assert "r.yaml, stage 2 'hot'" in err          # where the value came from
    assert not out.exists()                          # nothing ran


def test_stage_errors_name_stage_and_key(tmp_path, capsys):
    out = tmp_path / "run"
    cases = [
        (STAGES.replace("- name: hot", "- name: hot\n    model: {path: /x}"),
         "stage 2 'hot': model.path"),
        (STAGES.replace("checkpoint: {every: 1}", "logging: {output_dir: /tmp/x}"),
         "stage 2 'hot': logging.output_dir"),
        (STAGES.replace("- name: hot", "- name: warm"), "warm appear more than once"),
        (STAGES.replace("- name: hot", "- name: hot\n    run: ppo"), "run='ppo' must be one of"),
        (STAGES.replace("- name: warm", "- name: warm\n    checkpoint: {save_final: false}"),
         "stage 1 'warm': checkpoint.save_final=false"),
        (STAGES.replace("lr: 5.0e-4", "lr: -1"), "stage 2 'hot' of 2: invalid configuration"),
    ]
    for stages, expected in cases:
        recipe = write(tmp_path / "r.yaml", TOP + stages, out)
        assert main(["config", "show", recipe]) == 2, stages
        assert expected in capsys.readouterr().err, expected
    recipe = write(tmp_path / "r.yaml", TOP + STAGES, out)
    assert main(["config", "show", recipe, "stages.hoot.train.steps=1"]) == 2
    assert "NAME one of warm, hot" in capsys.readouterr().err
    # a staged recipe given to a one-stage command says what to do
    assert main(["sft", recipe]) == 2
    assert "has stages (warm, hot)" in capsys.readouterr().err


def test_stage_configs_resolve_in_order(tmp_path, capsys):
    from mindrl.config.stages import load_stages

    out = tmp_path / "run"
    recipe = write(tmp_path / "r.yaml", TOP + STAGES, out)
    warm, hot = load_stages(recipe, ["train.seed=3", "stages.hot.rollout.n=2"])
    assert (warm.cfg.train.steps, hot.cfg.train.steps) == (2, 3)
    assert (warm.cfg.train.lr, hot.cfg.train.lr) == (1e-3, 5e-4)
    assert (warm.cfg.train.seed, hot.cfg.train.seed) == (3, 3)      # command line: every stage
    assert (warm.cfg.rollout.n, hot.cfg.rollout.n) == (4, 2)         # stages.NAME.: one stage
    assert warm.cfg.logging.output_dir == str(out / "stage_1_warm")
    assert hot.cfg.logging.output_dir == str(out / "stage_2_hot")
    assert hot.cfg.model.path == str(out / "stage_1_warm" / "checkpoints" / "step_000002" /
                                     "model")
    assert main(["config", "show", recipe]) == 0
    shown = capsys.readouterr().out
    assert "# stage 1/2 'warm'" in shown and "# stage 2/2 'hot'" in shown


@pytest.mark.slow
def test_two_stages_chain_weights_and_resume_after_kill_in_stage_2(tmp_path, monkeypatch,
                                                                   capsys):
    from mindrl.trainer.rl import RLTrainer

    monkeypatch.chdir(tmp_path)
    # A: uninterrupted 2-stage run
    a = tmp_path / "a"
    assert main(["train", write(tmp_path / "a.yaml", TOP + STAGES, a)]) == 0
    w_a = final_weights(a / "stage_2_hot", 3)

    # C: stage "hot" by hand, from A's stage-1 weights == A's stage 2
    c = tmp_path / "c"
    assert main(["train", write(tmp_path / "c.yaml", HOT, c),
                 f"model.path={a / 'stage_1_warm/checkpoints/step_000002/model'}"]) == 0
    assert_same(w_a, final_weights(c, 3))
    # D: stage "hot" from the untrained model differs (so the comparison above can fail)
    d = tmp_path / "d"
    assert main(["train", write(tmp_path / "d.yaml", HOT, d)]) == 0
    assert differs(w_a, final_weights(d, 3))

    # B: killed by SIGTERM during step 2 of stage 2, restarted with the same command
    b = tmp_path / "b"
    recipe_b = write(tmp_path / "b.yaml", TOP + STAGES, b)
    original = RLTrainer.run_step

    def run_step_then_sigterm(self):
        out = original(self)
        if self.step == 1 and str(self.run_dir).endswith("stage_2_hot"):
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(RLTrainer, "run_step", run_step_then_sigterm)
    with pytest.raises(SystemExit) as e:
        main(["train", recipe_b])
    assert e.value.code == 128 + signal.SIGTERM
    monkeypatch.setattr(RLTrainer, "run_step", original)
    stage1_metrics = (b / "stage_1_warm" / "metrics.jsonl").read_bytes()
    assert (b / "stage_2_hot" / "checkpoints" / "step_000002" / "COMPLETE").is_file()
    assert not (b / "stage_2_hot" / "checkpoints" / "step_000003").exists()
    capsys.readouterr()

    assert main(["train", recipe_b]) == 0
    printed = capsys.readouterr().out
    assert "stage 1/2 'warm': finished earlier" in printed
    assert "stage 2/2 'hot': resuming" in printed
    assert (b / "stage_1_warm" / "metrics.jsonl").read_bytes() == stage1_metrics  # not re-run
    assert_same(w_a, final_weights(b / "stage_2_hot", 3))
    assert [s["status"] for s in __import__("json").loads((b / "stages.json").read_text())] \
        == ["done", "done"]
