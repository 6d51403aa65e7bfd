"""Runs that must end: a data set whose prompts are all longer than ``data.max_prompt_len``
stops with one line (before the model loads, or when a whole epoch yields no prompt that fits),
and the graceful SIGTERM/SIGINT stop is bounded (a second signal exits at once; a step that
does not end within ``checkpoint.stop_grace_s`` exits with a line naming the key). Real runs of
``python -m mindrl train`` on the built-in models."""

import dataclasses
import json
import logging
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GSM8K = REPO.parent / "shared" / "data" / "train" / "gsm8k_train.openai.jsonl"
if not GSM8K.is_file():
    GSM8K = Path("/work/shared/data/train/gsm8k_train.openai.jsonl")


def env_for(tmp_path, **extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests" / "trainer"), str(REPO),
                                         env.get("PYTHONPATH", "")])
    return env


def mindrl_train(tmp_path, *args, timeout=180):
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "mindrl", "train", *args,
                          f"logging.output_dir={tmp_path / 'run'}"], env=env_for(tmp_path),
                         cwd=tmp_path, timeout=timeout, capture_output=True, text=True)
    return res, time.monotonic() - t0


def gsm8k_lengths(n=64):
    """Token counts of the first ``n`` GSM8K questions with builtin:mini's tokenizer (template
    'none': the question itself), through transformers, the way the trainer encodes them."""
    from transformers import AutoTokenizer

    from mindrl.models.tiny import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("builtin:mini"), local_files_only=True)
    qs = [json.loads(line)["question"] for line in GSM8K.read_text().splitlines()[:n]]
    return [len(tok.encode(q, add_special_tokens=False)) for q in qs]


@pytest.mark.slow
def test_no_prompt_of_the_first_rows_fits_stops_before_the_model_loads(tmp_path):
    # grpo_tiny_demo: template 'none', data.max_prompt_len=32; no GSM8K question fits in 32
    res, took = mindrl_train(tmp_path, "grpo_tiny_demo", f"data.train_file={GSM8K}",
                             "train.steps=1", timeout=240)
    L = gsm8k_lengths()
    assert min(L) > 32
    line = (f"data.max_prompt_len=32: no prompt of the first 64 rows fits (longest {max(L)}, "
            f"median {statistics.median(L):g} tokens after the chat template); raise "
            f"data.max_prompt_len or use shorter prompts")
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1] == f"mindrl: error: {line}" or \
        res.stderr.strip().splitlines()[-1].endswith(line), res.stderr[-2000:]
    assert "Loading weights" not in res.stderr + res.stdout        # no model was loaded
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    assert took < 60, took


def test_preflight_counts_too_long_prompts(tmp_path, caplog):
    """Some of the first rows too long: counted with the longest, the median and the limit."""
    from mindrl.config.loader import load_config
    from mindrl.data.preflight import preflight
    from mindrl.models.tiny import resolve_model_path
    from mindrl.trainer.prompts import build_streams

    L = gsm8k_lengths(8)
    limit = sorted(L)[3]                      # 4 of the 8 fit (lengths are distinct enough)
    long = sum(x > limit for x in L)
    assert 0 < long < 8
    cfg = load_config("grpo_gsm8k_smoke", [
        f"model.path={resolve_model_path('builtin:mini')}", "model.chat_template=none",
        f"data.train_file={GSM8K}", "data.system_prompt=", f"data.max_prompt_len={limit}",
        "data.preflight_rows=8"])
    plan_rows = build_streams(dataclasses.replace(cfg.data, max_train_samples=8), 0)[0]
    rows = plan_rows.rows.get(range(8))
    from mindrl.config.stages import Stage
    from mindrl.data.preflight import RUN_WARNINGS
    from mindrl.trainer.summary import summary_lines

    RUN_WARNINGS.clear()
    with caplog.at_level(logging.INFO, logger="mindrl.data"):
        lines = preflight(cfg, "rl", plan_rows.rows.plan, rows, count=8)
    line = (f"prompt lengths: {long} of the first 8 prompts are longer than "
            f"data.max_prompt_len={limit} and will be skipped (longest {max(L)}, median "
            f"{statistics.median(L):g} tokens)")
    assert f"warning: {line}" in lines
    # a warning, not an INFO line, and repeated in the run summary
    assert [r.levelno for r in caplog.records if line in r.getMessage()] == [logging.WARNING]
    summary = summary_lines([Stage(1, "", "train", cfg, 1)], {}, 1.0)
    assert f"warning:       {line}" in summary
    RUN_WARNINGS.clear()


def test_an_epoch_with_no_prompt_that_fits_stops(tmp_path):
    """The first rows fit (so the preflight passes), then the limit drops below every prompt:
    taking rows stops with the same line instead of spinning."""
    from mindrl.config.loader import load_config
    from mindrl.data.io import DataError
    from mindrl.trainer.rl import RLTrainer

    cfg = load_config("grpo_tiny_demo", [
        f"data.train_file={GSM8K}", "data.max_train_samples=6", "data.max_prompt_len=512",
        "train.prompts_per_step=4", "rollout.n=2", "train.micro_batch_size=8",
        "validation.every=0", "logging.progress_bar=false", "logging.tensorboard=false",
        "logging.plot=false", "reward.functions=[{name: gsm8k_accuracy}]",
        f"logging.output_dir={tmp_path / 'run'}"])
    tr = RLTrainer(cfg)
    try:
        L = gsm8k_lengths(6)
        tr.cfg = dataclasses.replace(tr.cfg, data=dataclasses.replace(tr.cfg.data,
                                                                      max_prompt_len=20))
        raised = []

        def take():
            try:
                tr._take_rows()
            except DataError as err:
                raised.append(err)

        worker = threading.Thread(target=take, daemon=True)   # a spin must fail, not hang
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "taking rows spins instead of stopping"
        assert len(raised) == 1
        # 12 rows skipped in a row (twice the 6 rows: a whole epoch seen), each row twice
        assert str(raised[0]) == (
            f"data.max_prompt_len=20: no prompt of a whole epoch (6 rows) fits (longest "
            f"{max(L)}, median {statistics.median(L + L):g} tokens after the chat template); "
            f"raise data.max_prompt_len or use shorter prompts")
    finally:
        tr.close()


# ----------------------------------------------------------------------------- signals
HANG_RECIPE = """
extends: {repo}/yaml_configs/grpo_tiny_demo.yaml
model: {{path: "builtin:tiny"}}
data: {{train_file: "arithmetic:digits=2,ops=+", max_val_samples: 8}}
rollout: {{n: 2, max_new_tokens: 4}}
reward:
  functions: [{{name: "trainer_helpers:hang_reward"}}]
  num_workers: 0
  timeout: 1000
validation: {{every: 0}}
train: {{steps: 3, prompts_per_step: 2, micro_batch_size: 4}}
checkpoint: {{every: 0, stop_grace_s: {grace}}}
logging: {{tensorboard: false, plot: false, progress_bar: false}}
"""


def start_hanging_run(tmp_path, grace):
    recipe = tmp_path / "hang.yaml"
    recipe.write_text(HANG_RECIPE.format(repo=REPO, grace=grace))
    marker = tmp_path / "step_started"
    proc = subprocess.Popen([sys.executable, "-m", "mindrl", "train", str(recipe),
                             f"logging.output_dir={tmp_path / 'run'}"],
                            env=env_for(tmp_path, MINDRL_TEST_HANG_MARKER=str(marker)),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    t0 = time.monotonic()
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() - t0 > 240:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the run never reached its reward: {err[-3000:]}")
        time.sleep(0.1)
    return proc


def wait_exit(proc, limit):
    """(return code, stderr, seconds until exit); kills the run and fails past ``limit``."""
    t0 = time.monotonic()
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the run did not exit within {limit} s")
    return proc.returncode, err, time.monotonic() - t0


@pytest.mark.slow
def test_a_step_that_never_ends_exits_after_the_grace(tmp_path):
    proc = start_hanging_run(tmp_path, grace=3)
    proc.send_signal(signal.SIGTERM)
    rc, err, took = wait_exit(proc, 60)
    assert rc == 128 + signal.SIGTERM, err[-2000:]
    assert 3 <= took < 30, took
    assert ("signal 15 received 3 s ago and the step has not ended "
            "(checkpoint.stop_grace_s=3): exiting without a checkpoint") in err
    assert not (tmp_path / "run" / "checkpoints").exists() or \
        not any((tmp_path / "run" / "checkpoints").iterdir())


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.slow
def test_a_second_signal_exits_at_once(tmp_path, second):
    proc = start_hanging_run(tmp_path, grace=0)              # 0: would wait for the step forever
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert proc.poll() is None                               # the first one waits for the step
    proc.send_signal(second)
    rc, err, took = wait_exit(proc, 30)
    assert rc == 128 + second, err[-2000:]
    assert took < 10, took
    assert f"signal {int(second)} received again: exiting now, without a checkpoint" in err


@pytest.mark.slow
def test_ctrl_c_ends_with_the_checkpoint_and_how_to_resume(tmp_path):
    """Ctrl-C mid-step with the progress bar on: the warning starts a line of its own (not glued
    to the bar), and the last line names the checkpoint saved and the command that resumes."""
    recipe = tmp_path / "pause.yaml"
    recipe.write_text(HANG_RECIPE.format(repo=REPO, grace=0)
                      .replace("hang_reward", "pause_reward")
                      .replace("progress_bar: false", "progress_bar: true"))
    marker, release = tmp_path / "step_started", tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-m", "mindrl", "train", str(recipe),
                             "logging.output_dir=run"],
                            env=env_for(tmp_path, MINDRL_TEST_HANG_MARKER=str(marker),
                                        MINDRL_TEST_RELEASE=str(release)),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    t0 = time.monotonic()
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() - t0 > 240:
            proc.kill()
            pytest.fail(f"the run never reached its reward: {proc.communicate()[1][-3000:]}")
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    release.touch()
    rc, err, _ = wait_exit(proc, 120)
    assert rc == 128 + signal.SIGINT, err[-2000:]
    lines = [ln for part in err.splitlines() for ln in part.split("\r")]
    warn = next(ln for ln in lines if "signal 2 received: saving a checkpoint" in ln)
    assert re.match(r"^\d{4}-\d\d-\d\d ", warn), warn          # its own line: no bar before it
    assert err.strip().splitlines()[-1] == (
        f"stopped by signal 2 after step 1 of 3; checkpoint saved: "
        f"run/checkpoints/step_000001; to resume from step 1, run the same command again: "
        f"mindrl train {recipe} logging.output_dir=run")
    assert (tmp_path / "run" / "checkpoints" / "step_000001" / "COMPLETE").is_file()
