"""The recipes labelled as the experiment log's (../shared/seeds/000_*.txt) or as a system of the
survey of R1 reproductions (002_*.txt) hold the values those documents state, and every command
written in a recipe's header parses and resolves.

VALUES is the table: (recipe, stage, config key, value, where the document states it). A value
the documents do not give is not in it (the recipe headers mark those "ours").
"""

import re
import shlex
from pathlib import Path

import pytest

from mindrl.config.stages import load_stages

REPO = Path(__file__).resolve().parents[2]
LOG, SURVEY = "000 (experiment log)", "002 (survey)"

VALUES = [
    # --- log section 13: continued DPO of a long-CoT RL model on its own R1-style samples
    ("dpo_seed_continued", "", "model.path", "/models/Open-Reasoner-V1", f"{LOG} 13"),
    ("dpo_seed_continued", "", "preference.loss", "dpo", f"{LOG} 13.3"),
    ("dpo_seed_continued", "", "data.max_response_len", 65536, f"{LOG} 13.4 (64K samples)"),
    # --- log section 14: SimPO + SFT term, evaluated at step 300
    ("simpo_sft_seed", "", "preference.loss", "simpo", f"{LOG} 14"),
    ("simpo_sft_seed", "", "preference.sft_term", "mean_token",
     f"{LOG} 14 (-policy_chosen_log_probs, length-averaged by its trainer)"),
    ("simpo_sft_seed", "", "train.steps", 300, f"{LOG} 14 (evaluated at step 300)"),
    # --- log sections 5-6: GRPO on GSM8K from Qwen2.5-7B Base
    ("grpo_gsm8k_qwen25_7b_ascend", "", "model.path", "/models/Qwen2.5-7B", f"{LOG} 5.1"),
    ("grpo_gsm8k_qwen25_7b_ascend", "", "data.train_file", "gsm8k", f"{LOG} 5.1"),
    ("grpo_gsm8k_qwen25_7b_ascend", "", "algorithm.adv_estimator", "grpo", f"{LOG} 6"),
    # --- log section 12: OpenThinker3-7B on AceReason-Math, two stages
    ("openthinker3_acereason_rl", "rl1", "model.path", "/models/OpenThinker3-7B", f"{LOG} 12.1"),
    ("openthinker3_acereason_rl", "rl1", "train.prompts_per_step", 128, f"{LOG} 12.3"),
    ("openthinker3_acereason_rl", "rl1", "rollout.max_new_tokens", 16384, f"{LOG} 12.3"),
    ("openthinker3_acereason_rl", "rl1", "train.lr", 1e-6, f"{LOG} 12.3"),
    ("openthinker3_acereason_rl", "rl1", "train.lr_schedule", "cosine", f"{LOG} 12.3"),
    ("openthinker3_acereason_rl", "rl1", "train.mini_batch_size", 0,
     f"{LOG} 12.3 (strict on-policy)"),
    ("openthinker3_acereason_rl", "rl1", "reward.functions.0.name", "cosine",
     f"{LOG} 12.3 (cosine_length_penalty)"),
    ("openthinker3_acereason_rl", "rl1", "train.steps", 200, f"{LOG} 12.5.1 (step-200 model)"),
    ("openthinker3_acereason_rl", "rl2", "data.from_stage", "eval+filter", f"{LOG} 12.5.1"),
    ("openthinker3_acereason_rl", "rl2", "data.resample.n", 8, f"{LOG} 12.5.1"),
    ("openthinker3_acereason_rl", "rl2", "data.resample.hi", 1.0,
     f"{LOG} 12.2 (drop the all-correct)"),
    ("openthinker3_acereason_rl", "rl2", "data.resample.keep_unsolved", True,
     f"{LOG} 12.2 (only the all-correct are dropped)"),
    # --- survey, GSM8K-R1
    ("grpo_gsm8k_qwen25_1.5b", "", "model.path", "/models/Qwen2.5-1.5B-Instruct", SURVEY),
    ("grpo_gsm8k_qwen25_1.5b", "", "reward.functions.0.name", "kk_format",
     f"{SURVEY} (Logic-RL's format checks, +1 / -1)"),
    ("grpo_gsm8k_qwen25_1.5b", "", "reward.functions.1.name", "gsm8k_accuracy",
     f"{SURVEY} (1 right / 0 wrong)"),
    ("grpo_gsm8k_qwen25_1.5b", "", "data.max_prompt_len", 512, SURVEY),
    ("grpo_gsm8k_qwen25_1.5b", "", "rollout.max_new_tokens", 1024, SURVEY),
    ("grpo_gsm8k_qwen25_1.5b", "", "rollout.n", 3, SURVEY),
    ("grpo_gsm8k_qwen25_1.5b", "", "train.lr", 3e-6, SURVEY),
    ("grpo_gsm8k_qwen25_1.5b", "", "model.dtype", "bfloat16", SURVEY),
    ("grpo_gsm8k_qwen25_1.5b", "", "rollout.engine", "vllm", SURVEY),
    ("grpo_gsm8k_qwen25_1.5b", "", "train.fsdp", True, f"{SURVEY} (ZeRO-3)"),
    ("grpo_gsm8k_qwen25_1.5b", "", "distributed.nproc", 4, f"{SURVEY} (4 x A100)"),
    ("grpo_gsm8k_qwen25_1.5b", "", "train.prompts_per_step", 1 * 16 * 4,
     f"{SURVEY} (1 per device x 16 accumulation x 4 devices)"),
    # --- survey, Mini-R1
    ("countdown_mini_r1", "", "model.path", "/models/Qwen2.5-3B-Instruct", SURVEY),
    ("countdown_mini_r1", "", "rollout.n", 8, f"{SURVEY} (8 samples)"),
    ("countdown_mini_r1", "", "reward.functions.0.name", "countdown_format", SURVEY),
    ("countdown_mini_r1", "", "reward.functions.1.params.check", "mini_r1",
     f"{SURVEY} (digits, + - * / ( ) . and whitespace)"),
    ("countdown_mini_r1", "", "reward.functions.1.params.tolerance", 1e-5, f"{SURVEY} (< 1e-5)"),
    ("countdown_mini_r1", "", "train.steps", 450, f"{SURVEY} (50% at 450 steps)"),
    # --- survey, Logic-RL: warm-up on 3 people for 3 epochs, T 1.2, anneal to T 0.9 / lr 2e-7
    ("logic_rl_schedule", "warmup", "model.path", "/models/Qwen2.5-7B-Instruct-1M", SURVEY),
    ("logic_rl_schedule", "warmup", "algorithm.adv_estimator", "grpo", SURVEY),
    ("logic_rl_schedule", "warmup", "data.train_file", "kk:gen,count=900,people=3",
     f"{SURVEY} (3-person warm-up)"),
    ("logic_rl_schedule", "warmup", "train.steps", 3 * (900 // 16), f"{SURVEY} (3 epochs)"),
    ("logic_rl_schedule", "warmup", "rollout.n", 64, f"{SURVEY} (64 -> 32 -> 16)"),
    ("logic_rl_schedule", "train", "rollout.temperature", 1.2, SURVEY),
    ("logic_rl_schedule", "train", "rollout.n", 32, f"{SURVEY} (64 -> 32 -> 16)"),
    ("logic_rl_schedule", "anneal3", "rollout.temperature", 0.9, SURVEY),
    ("logic_rl_schedule", "anneal3", "train.lr", 2e-7, SURVEY),
    ("logic_rl_schedule", "anneal3", "rollout.n", 16, f"{SURVEY} (64 -> 32 -> 16)"),
    ("logic_rl_schedule", "warmup", "reward.functions.0.name", "kk_format", f"{SURVEY} (+1 / -1)"),
    ("logic_rl_schedule", "warmup", "reward.functions.1.name", "kk_answer",
     f"{SURVEY} (+2 / -1.5 / -2)"),
    ("logic_rl_kk", "ppl3", "model.path", "/models/Qwen2.5-7B-Instruct-1M", SURVEY),
    # --- survey, simpleRL: 8 samples per problem
    ("simplerl_zoo_qwen25_math_7b", "", "rollout.n", 8, SURVEY),
]


def _get(cfg, dotted):
    obj = cfg
    for part in dotted.split("."):
        obj = obj[int(part)] if part.isdigit() else \
            (obj[part] if isinstance(obj, dict) else getattr(obj, part))
    return obj


def _stage(recipe, name):
    stages = load_stages(recipe)
    found = [s for s in stages if s.name == name]
    assert found, f"{recipe}: no stage {name!r} (has {[s.name for s in stages]})"
    return found[0].cfg


@pytest.mark.parametrize("recipe, stage, key, value, source", VALUES,
                         ids=[f"{r}:{s or '-'}:{k}" for r, s, k, *_ in VALUES])
def test_recipe_holds_the_documents_value(recipe, stage, key, value, source):
    got = _get(_stage(recipe, stage), key)
    if isinstance(value, float):
        assert got == pytest.approx(value), f"{recipe} {key}={got}; {source} states {value}"
    else:
        assert got == value, f"{recipe} {key}={got!r}; {source} states {value!r}"


def test_the_reward_values_of_the_survey():
    """Logic-RL's and GSM8K-R1's format reward: +1 well-formed, -1 for a misplaced or repeated
    tag; Logic-RL's answer reward: +2 / -1.5 / -2."""
    from rewards.knights_knaves import KKAnswer, kk_format

    assert kk_format(["<think>x</think><answer>7</answer>",
                      "<think><think>x</think><answer>7</answer>",   # repeated tag
                      "<answer>7</answer><think>x</think>",          # answer before think
                      "<think>x<answer>7</answer></think>",          # answer inside think
                      "7"]) == [1.0, -1.0, -1.0, -1.0, -1.0]
    got = KKAnswer()(["<think>.</think><answer>(1) A is a knight (2) B is a knave</answer>",
                      "<think>.</think><answer>(1) A is a knave (2) B is a knave</answer>",
                      "<think>.</think><answer>no idea</answer>"],
                     solution=[["knight", "knave"]] * 3, names=[["A", "B"]] * 3)
    assert got == [2.0, -1.5, -2.0]


# ----------------------------------------------------------------------- header commands
def header_commands(path):
    """The commands of a recipe's header comment: lines ``#   mindrl ...`` or ``#   bash
    launch/...``, continuation lines joined, a trailing ``# comment`` dropped."""
    out, buf = [], ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if buf:
            buf += " " + body
        elif re.match(r"(mindrl|bash launch/)\S* ", body):
            buf = body
        else:
            continue
        if buf.endswith("\\"):
            buf = buf[:-1].rstrip()
            continue
        for part in re.split(r"\s+/\s+(?=mindrl )", buf):      # "A   /   B": two commands
            out.append(re.sub(r"\s+#.*$|\s+\(.*\)$", "", part))
        buf = ""
    return out


RECIPES = sorted((REPO / "yaml_configs").glob("*.yaml"))
HEADERS = [(p.stem, c) for p in RECIPES for c in header_commands(p)]


def test_header_commands_are_found():
    names = {r for r, _ in HEADERS}
    assert {"dpo_seed_continued", "simpo_sft_seed", "grpo_gsm8k_qwen25_1.5b",
            "logic_rl_schedule", "countdown_mini_r1"} <= names
    dpo = [c for r, c in HEADERS if r == "dpo_seed_continued"]
    assert [c.split()[1] for c in dpo] == ["data", "eval", "data", "dpo"]
    assert ("ppo_orz_smoke", "mindrl train ppo_orz_smoke backend=mindspore") in HEADERS
    bad = "mindrl eval /m --benchmarks gsm8k_train --samples 8"     # the kind of line refused
    with pytest.raises(SystemExit):
        from mindrl.cli import parse_argv
        parse_argv(shlex.split(bad)[1:])


@pytest.mark.parametrize("recipe, command", HEADERS,
                         ids=[f"{r}:{c[:48]}" for r, c in HEADERS])
def test_header_command_parses_and_resolves(recipe, command):
    """Every option exists; a training command's recipe and overrides load; an eval command's
    benchmarks are built-in names or files; a preference recipe is run by its own command."""
    from mindrl.cli import parse_argv
    from mindrl.data.benchmarks import _looks_like_file, is_builtin, split_benchmarks

    argv = shlex.split(command)
    if argv[0] == "bash":
        assert (REPO / argv[1]).is_file(), command
        load_stages(argv[2], argv[3:])
        return
    try:
        args = parse_argv(argv[1:])
    except SystemExit:
        pytest.fail(f"{recipe} header: `{command}` does not parse")
    sub = argv[1]
    if sub in ("train", "sft", "dpo", "simpo"):
        stages = load_stages(args.recipe, list(args.overrides))
        if sub in ("dpo", "simpo"):
            assert stages[0].cfg.preference.loss == sub, command
    if sub == "eval" and args.benchmarks:
        for b in split_benchmarks(args.benchmarks):
            known = is_builtin(b) or b.startswith("hf:") or _looks_like_file(b) or \
                re.match(r"(arithmetic|kk|countdown)\w*:", b)              # a generated task
            assert known, f"{recipe} header: `{command}`: {b} is neither a benchmark nor a file"
