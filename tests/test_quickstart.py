"""The README's quick start, line by line, as a new user types it: in a fresh login-less shell
whose PATH has only the system directories, after the README's one PATH line
(``source .venv/bin/activate``), from an empty folder with a data file of their own.

Each line of the quick-start block runs as written, with cheap overrides appended (one
training step, one eval problem); the demo line is checked for its last line (the PATH hint)
with a recipe that fails at once, since the full demo takes minutes (tests/trainer/test_demo.py
runs its stages). The GPU line runs as `mindrl config show` (no GPU here). The test fails when
the README's quick start changes without this test: the commands must be the ones below.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent

EXPECTED = [
    "bash launch/run_grpo.sh",
    "mindrl train grpo_own_math_tiny data.train_file=mine.jsonl logging.output_dir=runs/mine",
    "mindrl train grpo_own_math data.train_file=mine.jsonl model.path=/models/Qwen2.5-1.5B-Instruct",
    "mindrl eval runs/mine --benchmarks mine.jsonl --n 4",
    "mindrl plot runs/mine",
]
CHEAP = {
    "mindrl train grpo_own_math_tiny": " train.steps=1 validation.every=0 logging.progress_bar=false",
    "mindrl eval": " --limit 1 --max-new-tokens 8 --grade-workers 0",
}


def quickstart_commands():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    cmds = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if line:
            cmds.append(re.sub(r"\s+", " ", line))
    return cmds


def activate_line():
    install = README.read_text(encoding="utf-8").split("## Install", 1)[1].split("```bash", 1)[1]
    return next(line.split("#", 1)[0].strip() for line in install.splitlines()
                if "activate" in line)


def test_the_quick_start_is_the_one_this_test_runs():
    assert quickstart_commands() == EXPECTED
    assert activate_line() == "source .venv/bin/activate"


def _fresh_shell(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"HOME": str(cwd), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "OMP_NUM_THREADS": "1", "GLOG_v": "3", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
    for k in ("MINDRL_SHARED_DATA", "MINDRL_DATA_DIR", "MINDRL_CACHE", "TMPDIR"):
        if k in os.environ:
            env[k] = os.environ[k]
    return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_quick_start_runs_line_by_line_in_a_fresh_shell(tmp_path):
    rows = [{"problem": f"Tom has {a} apples and gets {b} more. How many now?",
             "answer": str(a + b)} for a, b in zip(range(2, 14), range(5, 17))]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # `source .venv/bin/activate`, from the checkout the user cloned (the venv this suite runs in)
    lines = [f"source {VENV_BIN / 'activate'}", "command -v mindrl", "mindrl --help >/dev/null"]
    for cmd in quickstart_commands():
        if cmd == "bash launch/run_grpo.sh":
            continue                         # below: its PATH hint
        if cmd.startswith("mindrl train grpo_own_math "):
            cmd = cmd.replace("mindrl train", "mindrl config show", 1)
        for prefix, extra in CHEAP.items():
            if cmd.startswith(prefix):
                cmd += extra
        lines.append(f"echo '>>> {cmd}'")
        lines.append(cmd)
    res = _fresh_shell("\n".join(lines), tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    assert out.splitlines()[0] == str(VENV_BIN / "mindrl")      # on the PATH after activate
    assert "== finished: grpo_own_math_tiny, 1 steps" in out
    assert "| mine" in out
    assert (tmp_path / "runs/mine/checkpoints/step_000001/model").is_dir()
    assert (tmp_path / "runs/mine/curves.png").is_file()
    assert list((tmp_path / "runs/eval").glob("mine-step1_mine*/results.json"))


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(),
                    reason="needs the checkout's own .venv (made by launch/setup_env.sh, as in CI)")
def test_the_launcher_ends_with_the_path_line(tmp_path):
    res = subprocess.run(["bash", str(REPO / "launch/run_grpo.sh"), "no_such_recipe"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900,
                         env=dict(os.environ, PATH="/usr/bin:/bin"))
    assert res.returncode == 2
    assert "recipe 'no_such_recipe' not found" in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last == f"[run_grpo] to use the mindrl command in your shell: source " \
                   f"{(REPO / '.venv').resolve()}/bin/activate"
