"""Each demo variant has a run folder of its own, so none resumes (or refuses) another's."""

from mindrl.cli import build_parser
from mindrl.trainer.demo import demo_output_dir


def test_variants_get_their_own_folder():
    assert demo_output_dir() == ("runs/demo", [])
    # MINDRL_BACKEND=mindspore bash launch/run_grpo.sh == mindrl demo --backend mindspore
    assert demo_output_dir("mindspore")[0] == "runs/demo-mindspore"
    assert demo_output_dir("torch", "addition", ["train.seed=1"]) == \
        ("runs/demo-seed1", ["train.seed=1"])
    assert demo_output_dir("torch", "kk")[0] == "runs/demo-kk"
    folders = {demo_output_dir(b, t, o)[0] for b in ("torch", "mindspore")
               for t in ("addition", "kk", "countdown", "tool")
               for o in ([], ["train.seed=1"], ["train.seed=2"])}
    assert len(folders) == 2 * 4 * 3
    long = demo_output_dir(overrides=[f"algorithm.clip_ratio_high={x}" for x in range(20)])[0]
    assert long.startswith("runs/demo-") and len(long) < 30


def test_output_dir_option_and_override_pick_the_folder():
    assert demo_output_dir(overrides=["logging.output_dir=runs/mine", "train.seed=3"]) == \
        ("runs/mine", ["train.seed=3"])
    assert demo_output_dir(overrides=["logging.output_dir=runs/a"], output_dir="runs/b") == \
        ("runs/b", [])
    args = build_parser().parse_args(["demo", "train.seed=1"])
    assert args.output_dir is None and args.overrides == ["train.seed=1"]
