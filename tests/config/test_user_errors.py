"""Errors a person causes reach them as one line naming the file, line or key, exit code 2.

Each test runs the real command line (``mindrl.cli.main``, or ``python -m mindrl`` where the
imports matter) and checks: exit 2, exactly one line on stderr, no traceback, and what it names.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mindrl.cli import build_parser, main
from mindrl.config.loader import load_config

REPO = Path(__file__).resolve().parents[2]


def run(argv, capsys):
    """(exit code, stderr lines) of ``mindrl ARGV``."""
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    return rc, err.splitlines()


def one_line(rc, lines, prefix="mindrl: "):
    assert rc == 2, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(prefix) and "Traceback" not in lines[0]
    return lines[0]


# --------------------------------------------------------------------------- YAML recipes
def test_duplicate_key_names_file_line_and_key(tmp_path, capsys):
    recipe = tmp_path / "dup.yaml"
    recipe.write_text("train:\n  lr: 1.0e-5\n  steps: 3\n  lr: 2.0e-5\n")
    line = one_line(*run(["config", "show", recipe], capsys))
    assert str(recipe.resolve()) in line and "line 4" in line and "'lr'" in line
    assert "line 2" in line                      # where the first one was


def test_duplicate_section_is_an_error(tmp_path, capsys):
    recipe = tmp_path / "dup.yaml"
    recipe.write_text("rollout:\n  n: 4\ntrain:\n  lr: 1.0e-5\nrollout:\n  n: 2\n")
    line = one_line(*run(["config", "show", recipe], capsys))
    assert "line 5" in line and "'rollout'" in line


def test_not_utf8_recipe_names_file_and_line(tmp_path, capsys):
    recipe = tmp_path / "latin1.yaml"
    recipe.write_bytes(b"train:\n  lr: 1.0e-5\n# caf\xe9 au lait\n")
    line = one_line(*run(["config", "show", recipe], capsys))
    assert str(recipe.resolve()) in line and "line 3" in line and "UTF-8" in line


def test_bad_yaml_is_one_line_with_line_number(tmp_path, capsys):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("train:\n  lr: [1, 2\nrollout:\n  n: 2\n")
    line = one_line(*run(["config", "show", recipe], capsys))
    assert str(recipe.resolve()) in line and "line " in line and "not valid YAML" in line


def test_extends_a_bare_name_beside_the_recipe(tmp_path):
    (tmp_path / "base.yaml").write_text("train:\n  lr: 3.0e-5\n  steps: 7\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base\ntrain:\n  steps: 9\n")
    cfg = load_config(str(child))
    assert cfg.train.lr == 3e-5 and cfg.train.steps == 9


def test_extends_a_built_in_recipe_by_name_from_anywhere(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: grpo_tiny_demo\ntrain:\n  steps: 5\n")
    cfg = load_config(str(mine))
    demo = load_config("grpo_tiny_demo")
    assert cfg.train.steps == 5
    assert cfg.model.path == demo.model.path == "builtin:mini"
    assert [f.name for f in cfg.reward.functions] == ["arithmetic"]
    assert cfg.train.prompts_per_step == demo.train.prompts_per_step == 64


def test_extends_prefers_the_file_beside_the_recipe(tmp_path):
    (tmp_path / "grpo_tiny_demo.yaml").write_text("train:\n  lr: 7.0e-6\n")
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: grpo_tiny_demo\n")
    assert load_config(str(mine)).train.lr == 7e-6


def test_extends_a_missing_parent_suggests_the_recipe(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: grpo_tiny_dmeo\n")
    line = one_line(*run(["config", "show", mine], capsys))
    assert str(mine.resolve()) in line and "grpo_tiny_dmeo" in line
    assert "did you mean grpo_tiny_demo " in line and "`mindrl recipes` lists all" in line
    assert "sft_tiny_demo" not in line                  # not the whole list


def test_single_check_failure_is_one_line(capsys):
    line = one_line(*run(["config", "show", "rollout.n=1"], capsys))
    assert "rollout.n >= 2" in line and "algorithm.adv_estimator=grpo" in line


# --------------------------------------------------------------------------- model.path
def test_unknown_builtin_model_at_load_time(capsys):
    line = one_line(*run(["config", "show", "grpo_tiny_demo", "model.path=builtin:tinyy"],
                         capsys))
    assert "model.path" in line and "builtin:tinyy" in line and "the command line" in line
    assert "valid: builtin:mini, builtin:small, builtin:tiny" in line


def _cli(args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    code = ("import sys, mindrl.cli; rc = mindrl.cli.main(sys.argv[1:]); "
            "print('heavy' if {'torch', 'mindspore', 'transformers'} & set(sys.modules) "
            "else 'light'); sys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.parametrize("command", ["train", "sft", "dpo"])
def test_missing_model_dir_before_any_heavy_import(tmp_path, command):
    res = _cli([command, "grpo_tiny_demo", f"model.path={tmp_path / 'qwen'}"], tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "model.path" in lines[0] and str(tmp_path / "qwen") in lines[0]
    assert res.stdout.strip() == "light"     # refused before torch/transformers were imported


def test_model_dir_without_config_json(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    line = one_line(*run(["train", "grpo_tiny_demo", f"model.path={model}"], capsys))
    assert "model.path" in line and "config.json" in line


def test_config_show_does_not_need_the_model_dir(capsys):
    # a recipe for another machine (/models/...) still shows
    capsys.readouterr()
    assert main(["config", "show", "grpo_gsm8k_qwen25_1.5b"]) == 0


# --------------------------------------------------------------------------- other commands
def test_plot_missing_folder(tmp_path, capsys):
    line = one_line(*run(["plot", tmp_path / "nope"], capsys))
    assert str(tmp_path / "nope") in line
    line = one_line(*run(["plot", tmp_path], capsys))      # a folder, but not a run
    assert "metrics.jsonl" in line


def test_eval_errors_share_the_one_handler(tmp_path, capsys):
    line = one_line(*run(["eval", tmp_path / "missing"], capsys), prefix="mindrl: error:")
    assert str(tmp_path / "missing") in line
    line = one_line(*run(["eval", "builtin:tinyy"], capsys), prefix="mindrl: error:")
    assert "builtin:tinyy" in line and "builtin:tiny" in line
    line = one_line(*run(["eval", "compare", tmp_path, tmp_path], capsys),
                    prefix="mindrl: error:")
    assert "results.json" in line


def test_eval_config_yaml_errors(tmp_path, capsys):
    cfg = tmp_path / "e.yaml"
    cfg.write_text("eval:\n  n: 3\n  n: 4\n")
    line = one_line(*run(["eval", "builtin:tiny", "--config", cfg], capsys))
    assert str(cfg.resolve()) in line and "line 3" in line and "'n'" in line
    cfg.write_bytes(b"eval:\n  n: 3\n  system_prompt: \xff\n")
    line = one_line(*run(["eval", "builtin:tiny", "--config", cfg], capsys))
    assert "line 3" in line and "UTF-8" in line


def test_launch_errors_share_the_one_handler(capsys):
    line = one_line(*run(["launch", "grpo_tiny_demo", "distributed.nproc=2",
                          "model.path=/nonexistent/qwen"], capsys), prefix="mindrl: error:")
    assert "/nonexistent/qwen" in line


def test_data_error_through_train(tmp_path, capsys):
    # a model directory that passes the check; the data file is missing
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (model / name).write_text("{}")
    line = one_line(*run(["train", "grpo_tiny_demo", f"model.path={model}",
                          f"data.train_file={tmp_path / 'none.jsonl'}"], capsys),
                    prefix="mindrl: error:")
    assert str(tmp_path / "none.jsonl") in line


def test_subprocess_prints_one_line_and_exit_2(tmp_path):
    recipe = tmp_path / "dup.yaml"
    recipe.write_text("train:\n  lr: 1.0e-5\n  lr: 2.0e-5\n")
    res = subprocess.run([sys.executable, "-m", "mindrl", "train", str(recipe)],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr[-2000:]
    assert str(recipe.resolve()) in res.stderr


# --------------------------------------------------------------------------- help
def test_eval_help_shows_each_default_once():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    ev = sub.choices["eval"]
    fmt = ev._get_formatter()
    checked = 0
    for action in ev._actions:
        if not action.help or not action.option_strings:
            continue
        text = fmt._expand_help(action)
        assert text.count("(default:") <= 1, (action.option_strings, text)
        assert "(default: None)" not in text, (action.option_strings, text)
        checked += 1
    assert checked >= 30
    # the defaults shown are EvalSettings' own
    helps = {a.dest: fmt._expand_help(a) for a in ev._actions if a.option_strings}
    assert "(default: 1)" in helps["n"] and "(default: 0.6)" in helps["temperature"]
    assert "(default: math500,aime24,aime25,amc23,gsm8k)" in helps["benchmarks"]
    assert json.dumps(helps)                      # every help expands without error
