"""Faults injected into run directories: torn JSONL lines, truncated checkpoint files, planted
pickles, a changed config on resume. Fast tests drive the helpers; the slow ones resume real
tiny-model runs (torch backend; the truncation case on MindSpore too)."""

import json
import logging
import os
import shutil
import zlib
from pathlib import Path

import pytest
import torch
import yaml

from mindrl.errors import UserError
from mindrl.trainer.logger import MetricsLogger

from test_rl_loop import cfg_for, rows  # noqa: E402  (tests/trainer is on sys.path)


class Plant:
    """Unpickling this runs a shell command that creates ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def crc_of(path):
    return f"{zlib.crc32(Path(path).read_bytes()):08x}"


def plant_in_manifest(ckpt, rel):
    """What a planter who also rewrites the manifest does (so only the loader stands between
    the file and the resume)."""
    man = Path(ckpt) / "manifest.json"
    if man.is_file():
        data = json.loads(man.read_text())
        p = Path(ckpt) / rel
        data["files"][rel] = {"size": p.stat().st_size, "crc32": crc_of(p)}
        man.write_text(json.dumps(data))


# ------------------------------------------------------------------ JSONL (fast)
def test_append_cuts_a_torn_line_and_warns_with_the_bytes(tmp_path, caplog):
    from mindrl.jsonl import append_jsonl, read_jsonl

    p = tmp_path / "m.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3, "b"')      # 12 torn bytes
    with caplog.at_level(logging.WARNING, logger="mindrl.jsonl"):
        append_jsonl(p, [{"a": 4}, {"a": 5}])
    assert p.read_bytes() == b'{"a": 1}\n{"a": 2}\n{"a": 4}\n{"a": 5}\n'
    assert "m.jsonl" in caplog.text and "12 bytes" in caplog.text
    # a whole record that only lacks its newline is kept, not dropped
    p.write_bytes(b'{"a": 1}\n{"a": 2}')
    append_jsonl(p, [{"a": 3}])
    assert read_jsonl(p) == [{"a": 1}, {"a": 2}, {"a": 3}]
    # a file that is one torn line loses it all; a missing file is created
    p.write_bytes(b'{"a')
    append_jsonl(p, [{"a": 9}])
    assert p.read_bytes() == b'{"a": 9}\n'
    append_jsonl(tmp_path / "new.jsonl", [{"x": 1}])
    assert (tmp_path / "new.jsonl").read_text() == '{"x": 1}\n'


def test_read_skips_a_torn_tail_but_names_a_bad_line_inside(tmp_path):
    from mindrl.jsonl import read_jsonl

    p = tmp_path / "m.jsonl"
    p.write_bytes(b'{"a": 1}\n\n{"a": 2}\n{"a": 3, "')
    assert read_jsonl(p) == [{"a": 1}, {"a": 2}]
    p.write_bytes(b'{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(UserError, match=r"m\.jsonl:2: not a JSON line"):
        read_jsonl(p)


def test_metrics_logger_resumes_over_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n{"step": 3, "lo')
    logger = MetricsLogger(tmp_path, tensorboard=False)
    logger.truncate_after(2)           # resume from step 2: crashed on the torn line before
    logger.log(3, {"loss": 0.25})
    assert [json.loads(x) for x in path.read_text().splitlines()] == [
        {"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.4}, {"step": 3, "loss": 0.25}]


def test_metrics_logger_append_after_a_torn_line_keeps_the_new_row(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "lo')
    MetricsLogger(tmp_path, tensorboard=False).log(2, {"loss": 0.4})
    assert [json.loads(x) for x in path.read_text().splitlines()] == [
        {"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.4}]


def test_eval_samples_append_after_a_torn_line_loses_nothing(tmp_path):
    from mindrl.eval.runner import _append, read_samples

    path = tmp_path / "samples.jsonl"
    rec = lambda i: {"benchmark": "b", "problem_id": str(i), "sample_index": 0,  # noqa: E731
                     "settings_hash": "h", "text": f"t{i}"}
    _append(path, [rec(0)])
    with path.open("a") as f:                       # a crash mid-write of record 1
        f.write(json.dumps(rec(1))[:20])
    _append(path, [rec(1), rec(2)])                 # the rerun regenerates record 1
    got = read_samples(path, "h")
    assert sorted(k[1] for k in got) == ["0", "1", "2"]
    assert all(json.loads(x) for x in path.read_text().splitlines())


# ------------------------------------------------------------------ checkpoints (fast)
class FakeBackend:
    def __init__(self, payload=b"w" * 1000):
        self.payload = payload

    def save_pretrained(self, d):
        os.makedirs(d)
        Path(d, "model.safetensors").write_bytes(self.payload)

    def save_state(self, d):
        os.makedirs(d)
        Path(d, "optim.bin").write_bytes(b"o" * 10)


def test_manifest_records_sizes_and_crc32(tmp_path):
    from mindrl.trainer.checkpoint import save_checkpoint, verify_checkpoint

    payload = bytes(range(256)) * 4
    ck = save_checkpoint(tmp_path, 3, FakeBackend(payload), {"step": 3}, keep_last=2,
                         config="train:\n  lr: 0.001\n")
    files = json.loads((ck / "manifest.json").read_text())["files"]
    assert files["model/model.safetensors"] == {"size": 1024,
                                                "crc32": f"{zlib.crc32(payload):08x}"}
    assert files["state/optim.bin"]["size"] == 10
    assert set(files) == {"model/model.safetensors", "state/optim.bin", "trainer.json",
                          "config.yaml"}
    assert verify_checkpoint(ck) is None
    assert (ck / "COMPLETE").read_text() == "3"
    # same size, one byte changed: the checksum notices
    data = bytearray(payload)
    data[7] ^= 1
    (ck / "model" / "model.safetensors").write_bytes(bytes(data))
    assert "model.safetensors has CRC-32" in verify_checkpoint(ck)


def test_every_file_and_directory_is_fsynced_before_the_marker_and_the_rename(tmp_path,
                                                                              monkeypatch):
    """The real os.fsync and os.replace run; a spy records what they touched, in order."""
    from mindrl.trainer.checkpoint import save_checkpoint

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(src)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    root = tmp_path / "ck"
    final = save_checkpoint(root, 1, FakeBackend(), {"step": 1}, keep_last=2)
    tmp = next(src for kind, src in events if kind == "replace")
    synced = [Path(p).relative_to(tmp).as_posix() if p.startswith(tmp) else p
              for kind, p in events if kind == "fsync"]
    files = sorted(p.relative_to(final).as_posix() for p in final.rglob("*") if p.is_file())
    dirs = sorted(p.relative_to(final).as_posix() for p in final.rglob("*") if p.is_dir())
    assert set(files) | set(dirs) | {".", str(root)} <= set(synced)
    marker = synced.index("COMPLETE")
    assert set(files) - {"COMPLETE"} <= set(synced[:marker])        # data before the marker
    assert set(dirs) <= set(synced[:marker])
    assert events.index(("replace", tmp)) < events.index(("fsync", str(root)))  # rename, then
    assert events.index(("fsync", tmp)) < events.index(("replace", tmp))       # the parent


def test_damaged_newest_checkpoint_falls_back_then_refuses(tmp_path):
    from mindrl.trainer.checkpoint import find_resumable, save_checkpoint

    for step in (1, 2):
        save_checkpoint(tmp_path, step, FakeBackend(), {"step": step}, keep_last=2)
    assert find_resumable(tmp_path) == (tmp_path / "step_000002", [])
    w2 = tmp_path / "step_000002" / "model" / "model.safetensors"
    w2.write_bytes(w2.read_bytes()[:100])            # truncated, still marked COMPLETE
    ck, skipped = find_resumable(tmp_path)
    assert ck == tmp_path / "step_000001"
    assert skipped == [f"checkpoint step_000002 is damaged ({w2} has 100 bytes, the manifest "
                       f"says 1000)"]
    (tmp_path / "step_000001" / "state" / "optim.bin").unlink()
    with pytest.raises(UserError, match="no intact checkpoint.*step_000001 is damaged.*optim.bin "
                                        "is missing"):
        find_resumable(tmp_path)
    assert find_resumable(tmp_path / "nothing") == (None, [])


def test_config_changes_and_what_is_allowed(tmp_path):
    from mindrl.config.schema import ConfigError
    from mindrl.trainer.checkpoint import check_resume_config, config_changes

    old = {"train": {"lr": 0.001, "steps": 4, "betas": [0.9, 0.999]},
           "algorithm": {"adv_estimator": "grpo", "kl": {"coef": 0.0}},
           "logging": {"plot": True}}
    new = {"train": {"lr": 0.002, "steps": 8, "betas": [0.9, 0.95]},
           "algorithm": {"adv_estimator": "rloo", "kl": {"coef": 0.0}},
           "logging": {"plot": False}}
    assert config_changes(old, new) == {
        "algorithm.adv_estimator": ("grpo", "rloo"), "logging.plot": (True, False),
        "train.betas": ([0.9, 0.999], [0.9, 0.95]), "train.lr": (0.001, 0.002),
        "train.steps": (4, 8)}
    with pytest.raises(ConfigError) as e:
        check_resume_config(old, new, [], tmp_path)
    msg = str(e.value)
    for line in ('algorithm.adv_estimator: "grpo" -> "rloo"', "train.betas: [0.9, 0.999] -> "
                 "[0.9, 0.95]", "train.lr: 0.001 -> 0.002",
                 "checkpoint.allow_changes=[algorithm.adv_estimator,train.betas,train.lr]"):
        assert line in msg
    assert "train.steps" not in msg and "logging.plot" not in msg     # allowed by default
    with pytest.raises(ConfigError, match="algorithm.adv_estimator") as e:
        check_resume_config(old, new, ["train"], tmp_path)             # a whole section
    assert "train.lr" not in str(e.value)
    assert len(check_resume_config(old, new, ["train.*", "algorithm"], tmp_path)) == 5
    assert len(check_resume_config(old, new, ["*"], tmp_path)) == 5
    # a key added to mindrl after the checkpoint: a change only when it is not at its default;
    # a key removed since cannot be set and is not reported
    newer = {"train": {"lr": 0.001, "steps": 4, "betas": [0.9, 0.999], "clip": 1.0},
             "algorithm": {"adv_estimator": "grpo"}, "logging": {"plot": True}}
    defaults = {"train": {"clip": 1.0}}
    assert config_changes(old, newer, defaults) == {}
    newer["train"]["clip"] = 2.0
    assert config_changes(old, newer, defaults) == {"train.clip": (1.0, 2.0)}


def test_config_history_keeps_every_config_used(tmp_path):
    from mindrl.trainer.checkpoint import record_config

    (tmp_path / "config.yaml").write_text("lr: 1\n")            # a run from before history
    record_config(tmp_path, "lr: 2\n", 0)
    record_config(tmp_path, "lr: 2\n", 5)                        # unchanged: no new entry
    record_config(tmp_path, "lr: 3\n", 7)
    hist = tmp_path / "config_history"
    assert {p.name: p.read_text() for p in hist.iterdir()} == {
        "000_before.yaml": "lr: 1\n", "001_step000000.yaml": "lr: 2\n",
        "002_step000007.yaml": "lr: 3\n"}
    assert (tmp_path / "config.yaml").read_text() == "lr: 3\n"


def test_torch_state_file_with_a_planted_pickle_is_refused(tmp_path):
    from mindrl.backends.torch.backend import load_state_file

    marker = tmp_path / "PWNED"
    bad = tmp_path / "torch_optim.pt"
    torch.save({"optimizer": Plant(marker), "scheduler": {}}, bad)
    with pytest.raises(UserError, match="torch_optim.pt: refused to load"):
        load_state_file(bad, "cpu")
    assert not marker.exists()
    torch.load(bad, weights_only=False)        # what resume did before: the command runs
    assert marker.exists()
    good = tmp_path / "ok.pt"
    torch.save({"rng": torch.get_rng_state(), "steps": 3, "betas": (0.9, 0.99)}, good)
    assert load_state_file(good, "cpu")["betas"] == (0.9, 0.99)


# ------------------------------------------------------------------ end to end (slow)
EXTRA = ["train.steps=2", "checkpoint.every=1", "checkpoint.keep_last=2",
         "reward.functions=[{name: 'trainer_helpers:parity_reward'}]"]


def train(run_dir, *extra):
    from mindrl.trainer.rl import RLTrainer

    tr = RLTrainer(cfg_for(run_dir, *EXTRA, *extra))
    try:
        tr.fit()
    finally:
        tr.close()
    return tr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-step torch run with checkpoints at steps 1 and 2; tests work on copies."""
    run = tmp_path_factory.mktemp("trained") / "run"
    train(run)
    return run


def copy_run(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    return run


@pytest.mark.slow
def test_truncated_weights_and_torn_metrics_resume_from_the_previous_checkpoint(
        trained, tmp_path, caplog):
    run = copy_run(trained, tmp_path)
    w = run / "checkpoints" / "step_000002" / "model" / "model.safetensors"
    w.write_bytes(w.read_bytes()[:w.stat().st_size // 2])     # COMPLETE, but half the weights
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 3, "loss": 0.')                    # torn by a crash in step 3
    with caplog.at_level(logging.WARNING):
        tr = train(run, "train.steps=3")
    assert "checkpoint step_000002 is damaged" in caplog.text and str(w) in caplog.text
    assert "resuming from the previous one, step_000001" in caplog.text
    assert tr.step == 3
    assert [r["step"] for r in rows(run)] == [1, 2, 3]
    assert (run / "checkpoints" / "step_000003" / "COMPLETE").is_file()


@pytest.mark.slow
def test_planted_pickle_in_state_is_never_unpickled(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    marker = tmp_path / "PWNED"
    ckpt = run / "checkpoints" / "step_000002"
    torch.save({"optimizer": Plant(marker), "fsdp": False, "scheduler": {},
                "optimizer_steps": 2, "skipped_steps": 0}, ckpt / "state" / "torch_optim.pt")
    plant_in_manifest(ckpt, "state/torch_optim.pt")
    with pytest.raises(Exception) as e:
        train(run, "train.steps=3")
    assert not marker.exists(), "resume unpickled the planted file and ran its command"
    assert isinstance(e.value, UserError)
    assert "step_000002/state/torch_optim.pt: refused to load" in str(e.value)


@pytest.mark.slow
def test_changed_config_is_refused_before_the_model_loads_then_allowed(trained, tmp_path,
                                                                        monkeypatch):
    import mindrl.backends.base as backends
    from mindrl.config.schema import ConfigError

    run = copy_run(trained, tmp_path)
    first = (run / "config.yaml").read_text()
    real = backends.build_backend

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the config check")

    monkeypatch.setattr(backends, "build_backend", no_model)
    with pytest.raises(ConfigError) as e:
        train(run, "train.steps=3", "train.lr=2e-3", "algorithm.adv_estimator=rloo")
    msg = str(e.value)
    assert "train.lr: 0.001 -> 0.002" in msg
    assert 'algorithm.adv_estimator: "grpo" -> "rloo"' in msg
    assert "checkpoint.allow_changes=[algorithm.adv_estimator,train.lr]" in msg
    assert "train.steps" not in msg
    assert (run / "config.yaml").read_text() == first            # untouched
    assert [r["step"] for r in rows(run)] == [1, 2]

    monkeypatch.setattr(backends, "build_backend", real)
    tr = train(run, "train.steps=3", "train.lr=2e-3", "checkpoint.allow_changes=[train.lr]")
    assert tr.step == 3
    now = yaml.safe_load((run / "config.yaml").read_text())
    assert now["train"]["lr"] == 0.002 and now["train"]["steps"] == 3
    hist = sorted(p.name for p in (run / "config_history").iterdir())
    assert hist == ["000_step000000.yaml", "001_step000002.yaml"]
    assert (run / "config_history" / hist[0]).read_text() == first
    # the new checkpoint stores the config it was trained with
    stored = yaml.safe_load((run / "checkpoints" / "step_000003" / "config.yaml").read_text())
    assert stored["train"]["lr"] == 0.002


@pytest.mark.slow
def test_mindspore_truncated_optimizer_state_falls_back(tmp_path, caplog):
    run = tmp_path / "run"
    train(run, "backend=mindspore")
    st = run / "checkpoints" / "step_000002" / "state" / "ms_optimizer.safetensors"
    st.write_bytes(st.read_bytes()[:100])
    with caplog.at_level(logging.WARNING):
        tr = train(run, "backend=mindspore", "train.steps=3")
    assert "checkpoint step_000002 is damaged" in caplog.text and str(st) in caplog.text
    assert tr.step == 3 and [r["step"] for r in rows(run)] == [1, 2, 3]
