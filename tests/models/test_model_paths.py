"""Where a model path is taken (train/sft/dpo model.path, mindrl eval MODEL_DIR, the engines),
a checkpoint step folder and a run folder name the Hugging Face directory inside them:
``RUN/checkpoints/step_000002`` -> its ``model/``; ``RUN`` (or ``RUN/checkpoints``) -> the
``model/`` of the newest complete checkpoint (manifest.json and COMPLETE). Checked on the folders
of a real 2-step tiny run (conftest ``tiny_run``). Also: an output directory under a file is a
one-line error before the model loads."""

import json
import shutil
from pathlib import Path

import pytest

from mindrl.cli import main
from mindrl.models.tiny import ModelPathError, check_model_dir, resolve_model_path


def _step(run, n):
    return Path(run) / "checkpoints" / f"step_{n:06d}"


def test_step_folder_and_run_folder_name_their_model_dir(tiny_run):
    newest = str(_step(tiny_run, 2) / "model")
    assert sorted(p.name for p in (Path(tiny_run) / "checkpoints").iterdir()) == \
        ["step_000001", "step_000002"]
    for given, want in [(_step(tiny_run, 1), _step(tiny_run, 1) / "model"),
                        (_step(tiny_run, 2), newest),
                        (tiny_run, newest),
                        (Path(tiny_run) / "checkpoints", newest),
                        (Path(newest), newest)]:
        assert resolve_model_path(str(given)) == str(want), given
        check_model_dir(str(given))           # passes: it names a whole model directory


def test_run_folder_skips_checkpoints_that_are_not_complete(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    newer = _step(run, 3)                      # a newer step, but never finished
    shutil.copytree(_step(run, 2), newer)
    (newer / "COMPLETE").unlink()
    assert resolve_model_path(str(run)) == str(_step(run, 2) / "model")
    (newer / "COMPLETE").write_text("3")      # COMPLETE without its manifest: still not complete
    (newer / "manifest.json").unlink()
    assert resolve_model_path(str(run)) == str(_step(run, 2) / "model")
    (newer / "manifest.json").write_text("{}")
    assert resolve_model_path(str(run)) == str(newer / "model")


def test_errors_say_what_was_looked_for(tiny_run, tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copytree(_step(tiny_run, 1), _step(run, 1))
    (_step(run, 1) / "COMPLETE").unlink()
    with pytest.raises(ModelPathError, match=r"model\.path: model directory .*run lacks: "
                       r"config\.json.*holds step_000001 but no complete checkpoint "
                       r"\(step_\*/ with manifest\.json and COMPLETE"):
        check_model_dir(str(run))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelPathError, match=r"not a checkpoint step folder either \(no "
                       r"model/config\.json\) nor a run folder \(no checkpoints/step_\*/"):
        check_model_dir(str(tmp_path / "empty"))
    step = tmp_path / "step_000007"             # a step folder whose model/ lost its weights
    shutil.copytree(_step(tiny_run, 1), step)
    (step / "model" / "model.safetensors").unlink()
    with pytest.raises(ModelPathError, match=r"model directory .*step_000007/model \(in .*"
                       r"step_000007\) lacks: weights"):
        check_model_dir(str(step))


def test_config_and_eval_accept_a_step_folder_and_a_run_folder(tiny_run, tmp_path, shared_data,
                                                              monkeypatch, capsys):
    from mindrl.config.loader import load_config

    cfg = load_config("grpo_tiny_demo", [f"model.path={_step(tiny_run, 1)}"], require_model=True)
    assert cfg.model.path == str(_step(tiny_run, 1))
    monkeypatch.setenv("MINDRL_DATA_DIR", str(shared_data))
    out = tmp_path / "eval"
    rc = main(["eval", str(tiny_run), "--benchmarks", "gsm8k", "--limit", "1", "--n", "1",
               "--max-new-tokens", "2", "--temperature", "0", "--no-plot",
               "--output-dir", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert json.loads((out / "results.json").read_text())["model"] == \
        str((_step(tiny_run, 2) / "model").resolve())


@pytest.fixture
def broken_model(tiny_dir, tmp_path):
    """A model directory that passes the file checks but cannot load (junk weights): a command
    that got as far as loading it would fail with another error than the one expected."""
    d = tmp_path / "broken"
    shutil.copytree(tiny_dir, d)
    (d / "model.safetensors").write_bytes(b"junk")
    return d


@pytest.mark.parametrize("argv, key", [
    (["train", "grpo_tiny_demo", "model.path={model}", "logging.output_dir={out}"],
     "configuration error: logging.output_dir="),
    (["sft", "sft_tiny_demo", "model.path={model}", "logging.output_dir={out}"],
     "configuration error: logging.output_dir="),
    (["eval", "{model}", "--benchmarks", "gsm8k", "--limit", "1", "--output-dir", "{out}"],
     "error: --output-dir="),
    (["demo", "--output-dir", "{out}"], "error: --output-dir="),
])
def test_output_dir_under_a_file_is_one_line_before_the_model_loads(argv, key, broken_model,
                                                                    tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("not a directory")
    out = afile / "run"
    rc = main([a.format(model=broken_model, out=out) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.strip().count("\n") == 0, err
    assert err.startswith(f"mindrl: {key}'{out}'"), err
    assert f"{afile} is a file" in err
