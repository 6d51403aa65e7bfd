"""Config: recipes, inheritance, overrides, and the promised error messages."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from mindrl.config.loader import describe, dump_config, load_config, save_config
from mindrl.config.schema import ConfigError, RunConfig
from mindrl.registry import Registry

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_defaults_are_valid_and_frozen():
    cfg = load_config()
    assert cfg.algorithm.adv_estimator == "grpo"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.train.lr = 1.0


def test_every_option_has_help():
    rows = describe()
    assert len(rows) > 60
    missing = [key for key, _, _, help_text in rows if not help_text]
    assert missing == []


def test_extends_and_overrides(tmp_path):
    write(tmp_path / "base.yaml", "train:\n  lr: 1.0e-5\n  steps: 7\nrollout:\n  n: 4\n")
    child = write(tmp_path / "child.yaml", "extends: base.yaml\ntrain:\n  steps: 9\n")
    cfg = load_config(str(child), ["algorithm.adv_estimator=rloo", "train.betas=[0.9, 0.95]",
                                   "algorithm.kl.coef=0.01"])
    assert cfg.train.lr == 1e-5          # from the base
    assert cfg.train.steps == 9          # child over base
    assert cfg.rollout.n == 4
    assert cfg.algorithm.adv_estimator == "rloo"
    assert cfg.train.betas == [0.9, 0.95]
    assert cfg.algorithm.kl.coef == 0.01
    assert isinstance(cfg.train.lr, float)


def test_unknown_key_names_path_file_and_closest(tmp_path):
    bad = write(tmp_path / "bad.yaml", "algorithm:\n  adv_estimater: rloo\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(bad))
    msg = str(e.value)
    assert "algorithm.adv_estimater" in msg and str(bad.resolve()) in msg
    assert "did you mean 'algorithm.adv_estimator'" in msg


def test_unknown_key_inside_a_list_item():
    with pytest.raises(ConfigError, match=r"reward\.functions\[0\]\.wieght.*command line.*"
                                          r"reward\.functions\[0\]\.weight"):
        load_config(None, ["reward.functions=[{name: accuracy, wieght: 1}]"])


def test_unknown_key_in_base_names_the_base_file(tmp_path):
    write(tmp_path / "base.yaml", "train:\n  lrr: 1.0\n")
    child = write(tmp_path / "child.yaml", "extends: base.yaml\n")
    with pytest.raises(ConfigError, match="base.yaml"):
        load_config(str(child))


def test_wrong_type_names_key_value_and_expected_type():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train.lr=fast"])
    assert "train.lr='fast'" in str(e.value) and "expected float" in str(e.value)
    with pytest.raises(ConfigError, match="rollout.n=2.5.*expected int"):
        load_config(None, ["rollout.n=2.5"])
    with pytest.raises(ConfigError, match="logging.plot='yes please'.*expected bool"):
        load_config(None, ["logging.plot=yes please"])


def test_choices_are_enforced():
    with pytest.raises(ConfigError, match=r"backend='jax'.*must be one of \['torch', 'mindspore', 'mindformers'\]"):
        load_config(None, ["backend=jax"])


@pytest.mark.parametrize("overrides, fragment", [
    (["rollout.n=1"], "needs rollout.n >= 2"),
    (["algorithm.adv_estimator=passk", "algorithm.passk_k=9", "rollout.n=8"], "passk_k=9"),
    (["algorithm.clip_eps_high=0"], "clip_eps_high=0.0 must be > 0"),
    (["algorithm.dual_clip_c=0.5"], "dual_clip_c=0.5 must be > 1"),
    (["train.mini_batch_size=5"], "mini_batch_size=5 must divide"),
    (["algorithm.kl.in_reward=true", "algorithm.kl.coef=0.1"], "kl.in_reward=true"),
    (["rollout.top_p=0"], "rollout.top_p=0"),
])
def test_cross_field_checks(overrides, fragment):
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert fragment in str(e.value)


def test_unknown_estimator_lists_valid_names():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["algorithm.adv_estimator=grpoo"])
    msg = str(e.value)
    assert "algorithm.adv_estimator" in msg and "did you mean 'grpo'" in msg and "rloo" in msg


def test_saved_config_round_trips(tmp_path):
    cfg = load_config(None, ["algorithm.adv_estimator=rloo", "train.lr=2e-6"])
    save_config(cfg, tmp_path / "config.yaml")
    again = load_config(str(tmp_path / "config.yaml"))
    assert again == cfg


@pytest.mark.parametrize("recipe", sorted(p.stem for p in (REPO / "yaml_configs").glob("*.yaml")))
def test_every_shipped_recipe_resolves(recipe):
    from mindrl.config.stages import load_stages

    for stage in load_stages(recipe):               # a multi-stage recipe: every stage
        assert isinstance(stage.cfg, RunConfig)
        assert dump_config(stage.cfg)


def test_cli_config_show_prints_resolved_recipe():
    out = subprocess.run([sys.executable, "-m", "mindrl", "config", "show", "grpo_tiny_demo",
                          "train.lr=3e-6"], capture_output=True, text=True, check=True).stdout
    assert "lr: 3.0e-06" in out and "arithmetic" in out


def test_cli_config_error_exit_code():
    res = subprocess.run([sys.executable, "-m", "mindrl", "config", "show", "train.lrr=1"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "did you mean 'train.lr'" in res.stderr


def test_registry_rejects_duplicates_and_lists_names():
    reg = Registry("widget")
    reg.register("alpha", 1)
    with pytest.raises(KeyError, match="already registered"):
        reg.register("alpha", 2)
    with pytest.raises(KeyError) as e:
        reg.get("alpah")
    assert "did you mean 'alpha'" in str(e.value) and "valid names: alpha" in str(e.value)
