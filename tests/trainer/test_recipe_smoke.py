"""Every ``*_smoke`` recipe (yaml_configs/) runs end to end on the builtin tiny model, on both
backends: each stage of a multi-stage one, its rewards and algorithm settings, 2-3 steps in all.
The full-size recipes they extend are only resolved (tests/config/test_config.py)."""

import json
import math
from pathlib import Path

import pytest

from mindrl.cli import main
from mindrl.config.stages import load_stages

REPO = Path(__file__).resolve().parents[2]
SMOKES = sorted(p.stem for p in (REPO / "yaml_configs").glob("*_smoke.yaml"))
PREFERENCE = {"dpo_seed_smoke": "dpo", "simpo_sft_seed_smoke": "simpo"}


def write_pairs(path: Path) -> Path:
    rows = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)}
            for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_there_is_a_smoke_for_every_system():
    assert set(SMOKES) >= {"deepscaler_smoke", "skywork_or1_smoke", "simplerl_zoo_smoke",
                           "logic_rl_smoke", "countdown_mini_r1_smoke", "grpo_gsm8k_smoke",
                           "openthinker3_smoke", "dpo_seed_smoke", "simpo_sft_seed_smoke",
                           "open_r1_smoke", "open_r1_zero_smoke", "logic_rl_schedule_smoke",
                           "simplerl_sft_distill_smoke"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "mindspore"])
@pytest.mark.parametrize("recipe", SMOKES)
def test_smoke_recipe_runs(recipe, backend, tmp_path, monkeypatch, shared_data):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    over = [f"backend={backend}", f"data.data_dir={shared_data}", f"logging.output_dir={out}"]
    command = PREFERENCE.get(recipe, "train")
    if command != "train":
        over.append(f"data.train_file={write_pairs(tmp_path / 'pairs.jsonl')}")
    stages = load_stages(recipe, over)
    assert 2 <= sum(s.cfg.train.steps for s in stages) <= 3
    assert main([command, recipe] + over) == 0
    for s in stages:
        run = Path(s.cfg.logging.output_dir)
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == list(range(1, s.cfg.train.steps + 1)), run
        assert all(math.isfinite(r["loss"]) for r in rows), rows
        assert (run / "checkpoints" / f"step_{s.cfg.train.steps:06d}" / "COMPLETE").is_file()
