"""Published dataset shapes, 3 rows each, built here (no downloads), through each job's loader.

Each fixture copies the columns, nesting and file type of a public dataset (the source is named
above its builder); the text is shortened. The slow tests at the end run one training step of
the job each shape is used for (tiny model, CPU).
"""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mindrl.data.formats import load_file, plan
from mindrl.data.io import DataError
from mindrl.data.templates import ChatPrompt, Templated, render_prompt

Q = ["Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
     "in May. How many clips did Natalia sell altogether in April and May?",
     "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of "
     "babysitting. How much did she earn?",
     "Betty is saving money for a new wallet which costs $100. How much more money does she "
     "need?"]
A = ["72", "10", "5"]
GSM8K_SUFFIX = "Let's think step by step and output the final answer after \"####\"."


def write_parquet(path: Path, rows) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ----------------------------------------------------------------------------- fixtures
def verl_gsm8k(tmp_path: Path) -> Path:
    """verl examples/data_preprocess/gsm8k.py: data_source, prompt [user turn with the ####
    instruction], ability, reward_model {style: rule, ground_truth}, extra_info {split, index,
    answer (the rationale), question}."""
    return write_parquet(tmp_path / "gsm8k_train.parquet", [
        {"data_source": "openai/gsm8k",
         "prompt": [{"role": "user", "content": f"{q} {GSM8K_SUFFIX}"}],
         "ability": "math", "reward_model": {"style": "rule", "ground_truth": a},
         "extra_info": {"split": "train", "index": i, "answer": f"... #### {a}", "question": q}}
        for i, (q, a) in enumerate(zip(Q, A))])


def dapo_math_17k(tmp_path: Path) -> Path:
    """BytedTsinghua-SIA/DAPO-Math-17k (dataset card): the prompt wraps the problem in the
    "Answer: $Answer" instruction; reward_model.style 'rule-lighteval/MATH_v2'; extra_info.index
    a uuid string."""
    tpl = ("Solve the following math problem step by step. The last line of your response "
           "should be of the form Answer: $Answer (without quotes) where $Answer is the answer "
           "to the problem.\n\n{q}\n\nRemember to put your answer on its own line after "
           "\"Answer:\".")
    return write_parquet(tmp_path / "dapo-math-17k.parquet", [
        {"data_source": "math_dapo", "prompt": [{"content": tpl.format(q=q), "role": "user"}],
         "ability": "MATH", "reward_model": {"ground_truth": a, "style": "rule-lighteval/MATH_v2"},
         "extra_info": {"index": f"9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079-{i}"}}
        for i, (q, a) in enumerate(zip(Q, A))])


def skywork_or1(tmp_path: Path) -> Path:
    """Skywork/Skywork-OR1-RL-Data (dataset card): verl shape; ground_truth is a JSON list of
    accepted answers as a string; extra_info {index, model_difficulty {...}}."""
    golds = ['["72"]', '["10", "\\\\$10"]', '["5", "\\\\frac{10}{2}"]']
    return write_parquet(tmp_path / "skywork_or1_math.parquet", [
        {"data_source": "train-math-deepscaler", "prompt": [{"content": q, "role": "user"}],
         "ability": "math", "reward_model": {"ground_truth": g, "style": "rule"},
         "extra_info": {"index": i, "model_difficulty": {"DeepSeek-R1-Distill-Qwen-1.5B": 8,
                                                         "DeepSeek-R1-Distill-Qwen-7B": 4}}}
        for i, (q, g) in enumerate(zip(Q, golds))])


def orz_json(tmp_path: Path) -> Path:
    """Open-Reasoner-Zero data/orz_math_57k_collected.json: a JSON list of turn pairs
    [{from: human, value}, {from: assistant, ground_truth: {value}}]."""
    p = tmp_path / "orz_math_57k_collected.json"
    p.write_text(json.dumps([[{"from": "human", "value": q},
                              {"from": "assistant", "ground_truth": {"value": a}}]
                             for q, a in zip(Q, A)], indent=1))
    return p


AREAL_PROMPT = "<|im_start|>user\n{q}\nPlease reason step by step, and put your final answer " \
               "within \\boxed{{}}.<|im_end|>\n<|im_start|>assistant\n<think>\n"


def areal_boba(tmp_path: Path) -> Path:
    """inclusionAI/AReaL-boba-Data (AReaL's math jsonl, as read by QuestA's
    AReaL/datasets/process.py): prompt already in ChatML, solutions = list of boxed answers,
    query_id."""
    return write_jsonl(tmp_path / "AReaL-boba-106k.jsonl", [
        {"prompt": AREAL_PROMPT.format(q=q), "task": "math", "query_id": f"q{i}",
         "solutions": [f"\\boxed{{{a}}}"]} for i, (q, a) in enumerate(zip(Q, A))])


def harp(tmp_path: Path) -> Path:
    """aadityasingh/HARP HARP.jsonl: year, contest, number identify a problem; problem,
    answer, level, subject, solution_1..."""
    return write_jsonl(tmp_path / "HARP.jsonl", [
        {"year": "2019", "contest": c, "number": n, "problem": q, "answer": a, "level": 2,
         "subject": "prealgebra", "solution_1": "..."}
        for (c, n), q, a in zip([("AMC_10A", 4), ("AMC_10A", 5), ("AMC_12B", 4)], Q, A)])


def seed_pairwise(tmp_path: Path) -> Path:
    """The seed log's DPO rows: id, prompt, completion_1, completion_2, preferred (1 or 2)."""
    return write_jsonl(tmp_path / "seed_dpo.jsonl", [
        {"id": f"p{i}", "prompt": q, "completion_1": f"The answer is {a}.",
         "completion_2": "The answer is 3.", "preferred": 1 if i != 1 else 2}
        for i, (q, a) in enumerate(zip(Q, A))])


def trl_conversational_pref(tmp_path: Path) -> Path:
    """TRL conversational preference (trl-lib/ultrafeedback_binarized): prompt, chosen and
    rejected as message lists."""
    return write_jsonl(tmp_path / "ultrafeedback.jsonl", [
        {"prompt": [{"role": "user", "content": q}],
         "chosen": [{"role": "assistant", "content": a}],
         "rejected": [{"role": "assistant", "content": "3"}]} for q, a in zip(Q, A)])


def prompt_completion(tmp_path: Path) -> Path:
    """TRL standard prompt-completion (trl-lib/tldr shape)."""
    return write_jsonl(tmp_path / "pc.jsonl", [{"prompt": q, "completion": f"#### {a}"}
                                               for q, a in zip(Q, A)])


def numina_messages(tmp_path: Path) -> Path:
    """AI-MO/NuminaMath-CoT: source, problem, solution, messages [user, assistant]."""
    return write_jsonl(tmp_path / "numina.jsonl", [
        {"source": "gsm8k", "problem": q, "solution": f"So \\boxed{{{a}}}",
         "messages": [{"role": "user", "content": q},
                      {"role": "assistant", "content": f"So \\boxed{{{a}}}"}]}
        for q, a in zip(Q, A)])


# ----------------------------------------------------------------------------- loaders
def test_verl_gsm8k_rl_and_eval(tmp_path):
    p, rows = load_file(verl_gsm8k(tmp_path), "rl")
    assert p.describe() == ("detected: verl (problem <- prompt, answer <- "
                            "reward_model.ground_truth, id <- extra_info.index)")
    assert [r["answer"] for r in rows] == A and [r["id"] for r in rows] == ["0", "1", "2"]
    assert isinstance(rows[0]["problem"], ChatPrompt)
    assert rows[0]["problem"] == f"{Q[0]} {GSM8K_SUFFIX}"
    # the raw question instead of the instruction-wrapped prompt: a nested path
    _, rows = load_file(verl_gsm8k(tmp_path), "rl", fields={"problem": "extra_info.question"})
    assert rows[2]["problem"] == Q[2]


def test_verl_system_turn_is_the_system_prompt(tmp_path):
    f = write_parquet(tmp_path / "sys.parquet", [
        {"data_source": "x", "prompt": [{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "1+1?"}],
         "ability": "math", "reward_model": {"style": "rule", "ground_truth": "2"},
         "extra_info": {"index": 0}}])
    _, rows = load_file(f, "rl")
    assert rows[0]["problem"].system == "Be brief."
    assert render_prompt(rows[0]["problem"], "qwen25-math-cot") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n"
        "<|im_start|>assistant\n")
    # an explicit data.system_prompt wins over the data's own
    assert render_prompt(rows[0]["problem"], "qwen25-math-cot", system_prompt="S").startswith(
        "<|im_start|>system\nS<|im_end|>")


def test_few_shot_verl_prompt_under_the_model_template(tmp_path, tiny_dir):
    """template 'model' renders every turn (what verl's apply_chat_template does); the named
    templates take the last user turn."""
    from transformers import AutoTokenizer

    turns = [{"role": "system", "content": "S"}, {"role": "user", "content": "1+1?"},
             {"role": "assistant", "content": "2"}, {"role": "user", "content": "2+2?"}]
    f = write_parquet(tmp_path / "fs.parquet", [
        {"data_source": "x", "prompt": turns, "ability": "math",
         "reward_model": {"style": "rule", "ground_truth": "4"}, "extra_info": {"index": 0}}])
    _, rows = load_file(f, "rl")
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    assert render_prompt(rows[0]["problem"], "model", tokenizer=tok) == \
        tok.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    assert render_prompt(rows[0]["problem"], "none") == "S\n\n2+2?"


def test_dapo_and_skywork_any_of(tmp_path):
    _, rows = load_file(dapo_math_17k(tmp_path), "rl")
    assert rows[1]["answer"] == "10" and rows[1]["id"].endswith("-1")
    assert rows[0]["problem"].startswith("Solve the following math problem step by step.")
    _, rows = load_file(skywork_or1(tmp_path), "rl")
    # one-item lists are one answer; equal normal forms count once ("10.00" is "10")
    assert [r["answer"] for r in rows] == ["72", ["10", "\\$10"], ["5", "\\frac{10}{2}"]]


def test_any_of_gold_scores_the_best_alternative():
    from rewards.open_r1 import Accuracy
    from rewards.registry import any_of_gold

    acc = any_of_gold(Accuracy())
    # row 1: the second alternative matches; row 2: neither; row 3: a plain gold
    assert acc(["\\boxed{5}", "\\boxed{7}", "\\boxed{72}"],
               answer=[["4", "\\frac{10}{2}"], ["5", "6"], "72"]) == [1.0, 0.0, 1.0]


def test_any_of_gold_in_eval_grading():
    from mindrl.eval.grading import Grader

    g = Grader()
    assert [s for _, s in g.grade(["\\boxed{10.00}", "\\boxed{9}"], [["10", "ten"], "10"])] \
        == [1.0, 0.0]


def test_interval_gold_stays_one_answer():
    from mindrl.data.formats import gold_value

    assert gold_value("[1, 2]", "answer") == "[1, 2]"        # an interval, not any-of
    assert gold_value('["1", "2"]', "answer") == ["1", "2"]
    assert gold_value(["3"], "answer") == "3"


def test_orz_json(tmp_path):
    p, rows = load_file(orz_json(tmp_path), "rl")
    assert p.format.name == "orz"
    assert [(r["problem"], r["answer"]) for r in rows] == list(zip(Q, A))


def test_areal_prompt_is_not_templated_twice(tmp_path, tiny_dir):
    from transformers import AutoTokenizer

    p, rows = load_file(areal_boba(tmp_path), "rl")
    assert p.paths["answer"] == ["solutions"] and p.paths["id"] == ["query_id"]
    assert rows[0]["answer"] == "\\boxed{72}" and isinstance(rows[0]["problem"], Templated)
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    raw = AREAL_PROMPT.format(q=Q[0])
    for template in ("qwen25-math-cot", "none", "model"):
        text = render_prompt(rows[0]["problem"], template, tokenizer=tok)
        assert tok.encode(text, add_special_tokens=False) == \
            tok.encode(raw, add_special_tokens=False)
    # data.templated_prompts=never: wrapped again, as before
    _, rows = load_file(areal_boba(tmp_path), "rl", templated="never")
    assert render_prompt(rows[0]["problem"], "qwen25-math-cot").count("<|im_start|>user") == 2


def test_harp_joined_id(tmp_path):
    p, rows = load_file(harp(tmp_path), "eval", fields={"id": "year,contest,number"})
    assert [r["id"] for r in rows] == ["2019-AMC_10A-4", "2019-AMC_10A-5", "2019-AMC_12B-4"]
    from mindrl.data.benchmarks import load_benchmark

    rows = load_benchmark(str(harp(tmp_path)), id_field="year, contest, number")
    assert rows[2] == {"id": "2019-AMC_12B-4", "problem": Q[2], "answer": "5"}


def test_seed_pairwise_and_trl_conversational(tmp_path):
    from mindrl.trainer.preference import load_pairs

    rows = load_pairs(str(seed_pairwise(tmp_path)))
    assert [(r["chosen"], r["rejected"]) for r in rows] == [
        ("The answer is 72.", "The answer is 3."), ("The answer is 3.", "The answer is 10."),
        ("The answer is 5.", "The answer is 3.")]
    rows = load_pairs(str(trl_conversational_pref(tmp_path)))
    assert (rows[0]["problem"], rows[0]["chosen"], rows[0]["rejected"]) == (Q[0], "72", "3")


def test_seed_pairwise_bad_preferred(tmp_path):
    from mindrl.trainer.preference import load_pairs

    f = write_jsonl(tmp_path / "p.jsonl", [{"id": 1, "prompt": "q", "completion_1": "a",
                                            "completion_2": "b", "preferred": 1},
                                           {"id": 2, "prompt": "q", "completion_1": "a",
                                            "completion_2": "b", "preferred": 3}])
    with pytest.raises(DataError, match=r"p.jsonl: line 2: field 'preferred': must be 1 or 2"):
        load_pairs(str(f))


def test_sft_views(tmp_path):
    _, rows = load_file(prompt_completion(tmp_path), "sft")
    assert (rows[0]["problem"], rows[0]["response"]) == (Q[0], "#### 72")
    p, rows = load_file(numina_messages(tmp_path), "rl", fields={"answer": "solution"})
    assert p.format.name == "messages" and rows[1]["problem"] == Q[1]
    assert rows[1]["answer"] == "So \\boxed{10}"


def test_sharegpt_problem_is_the_human_turn(tmp_path):
    f = write_jsonl(tmp_path / "sg.jsonl", [{"conversations": [
        {"from": "system", "value": "S"}, {"from": "human", "value": q},
        {"from": "gpt", "value": a}], "answer": a} for q, a in zip(Q, A)])
    p, rows = load_file(f, "rl")
    assert p.format.name == "sharegpt" and rows[0]["problem"] == Q[0]
    assert rows[0]["problem"].system == "S" and rows[0]["answer"] == "72"
    _, rows = load_file(f, "rl", fields={"problem": "conversations[1].value"})
    assert rows[2]["problem"] == Q[2]


# ----------------------------------------------------------------------------- bad inputs
def test_answer_field_naming_an_object_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"gsm8k_train.parquet: row 1: field 'reward_model': "
                                        r"holds an object with keys: style, ground_truth; name "
                                        r"the key, e.g. reward_model.ground_truth"):
        load_file(verl_gsm8k(tmp_path), "rl", fields={"answer": "reward_model"})


def test_latin1_file_names_file_and_line(tmp_path):
    f = tmp_path / "latin.jsonl"
    f.write_bytes(b'{"problem": "a", "answer": "1"}\n{"problem": "caf\xe9", "answer": "2"}\n')
    with pytest.raises(DataError, match=r"latin.jsonl: line 2: not UTF-8 text \(byte 0xe9"):
        load_file(f, "rl")


def test_malformed_json_names_file_and_line(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('[\n {"problem": "a", "answer": "1"},\n {"problem": "b" "answer": "2"}\n]')
    with pytest.raises(DataError, match=r"bad.json: line 3: not valid JSON \(Expecting ','"):
        load_file(f, "rl")


def test_missing_field_error_is_one_based_everywhere(tmp_path):
    from mindrl.data.benchmarks import load_benchmark
    from mindrl.data.prompts import load_prompts

    f = write_jsonl(tmp_path / "m.jsonl", [{"q": "a", "a": "1"}, {"q": "b"}])
    for load in (lambda: load_prompts(str(f), prompt_field="q", answer_field="a"),
                 lambda: load_benchmark(str(f), problem_field="q", answer_field="a")):
        with pytest.raises(DataError, match=r"m.jsonl: line 2: field 'a': the row has no key"):
            load()
    p = write_parquet(tmp_path / "m.parquet", [{"q": "a", "a": {"x": 1}}])
    with pytest.raises(DataError, match=r"m.parquet: row 1: field 'a\.y': 'a' has no key 'y'"):
        load_file(p, "rl", fields={"problem": "q", "answer": "a.y"})


def test_field_paths():
    from mindrl.data.fields import get_field, join_id, parse_path

    row = {"prompt": [{"role": "user", "content": "hi"}], "rm": {"gt": "3"}}
    assert get_field(row, "prompt[-1].content") == "hi" and get_field(row, "rm.gt") == "3"
    assert parse_path("a[0][-2].b") == ("a", 0, -2, "b")
    assert join_id({"y": 2019, "c": "A"}, ["y", "c"]) == "2019-A"
    for bad in ("a..b", ".a", "a[x]", "a[0]b"):
        with pytest.raises(DataError, match="field path"):
            parse_path(bad)


def test_unknown_format_is_named(tmp_path):
    with pytest.raises(DataError, match=r"unknown data format 'verll'; did you mean 'verl'"):
        plan({"a": 1}, "rl", "x.jsonl", fmt="verll")


# ----------------------------------------------------------------------------- data tools
def test_inspect_and_convert_round_trip(tmp_path, capsys):
    from mindrl.cli import main

    src = verl_gsm8k(tmp_path)
    assert main(["data", "inspect", str(src)]) == 0
    out = capsys.readouterr().out
    assert "detected format: verl" in out and "reward_model: struct<style: string" in out
    assert "train (RL) / eval: problem <- prompt, answer <- reward_model.ground_truth" in out
    assert f"{src}: row 2: id=1, problem=" in out
    jl = tmp_path / "back.jsonl"
    assert main(["data", "convert", str(src), "-o", str(jl), "--to", "mindrl"]) == 0
    back = [json.loads(x) for x in jl.read_text().splitlines()]
    assert back[0] == {"id": "0", "problem": f"{Q[0]} {GSM8K_SUFFIX}", "answer": "72"}
    again = tmp_path / "again.parquet"
    assert main(["data", "convert", str(jl), "-o", str(again), "--to", "verl",
                 "--data-source", "openai/gsm8k"]) == 0
    t = pq.read_table(again).to_pylist()
    assert t[1]["prompt"] == [{"role": "user", "content": f"{Q[1]} {GSM8K_SUFFIX}"}]
    assert t[1]["reward_model"] == {"style": "rule", "ground_truth": "10"}
    assert t[1]["extra_info"]["id"] == "1" and t[1]["data_source"] == "openai/gsm8k"
    # ORZ -> verl keeps an any-of gold as a JSON list string (Skywork's convention)
    sk = tmp_path / "sk.parquet"
    assert main(["data", "convert", str(skywork_or1(tmp_path)), "-o", str(sk)]) == 0
    assert pq.read_table(sk).to_pylist()[1]["reward_model"]["ground_truth"] == \
        '["10", "\\\\$10"]'


def test_data_tools_take_field_options(tmp_path):
    from mindrl.data.cli import main

    # an eval run over a verl file: the samples name problems by extra_info.index
    src = verl_gsm8k(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    recs = [{"benchmark": src.stem, "problem_id": str(i), "sample_index": k, "text": "x",
             "score": float(k == 0), "length": 3, "finish_reason": "stop"}
            for i in range(3) for k in range(2)]
    write_jsonl(run / "samples.jsonl", recs)
    out = tmp_path / "f.jsonl"
    assert main(["data", "filter", str(run), "-o", str(out), "--lo", "0.1", "--hi", "0.9",
                 "--problems", str(src), "--problem-field", "extra_info.question"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["problem"], r["answer"]) for r in rows] == list(zip(Q, A))


# ----------------------------------------------------------------------------- preflight
def none_unless_empty(completions, **_):
    """Scores the preflight's empty completion, but nothing the model writes (a reward whose
    gold never matches the rollouts' shape)."""
    return [0.0 if not c else None for c in completions]


BASE = ["model.path=builtin:tiny", "model.chat_template=none", "rollout.n=2",
        "rollout.max_new_tokens=4", "train.prompts_per_step=2", "train.micro_batch_size=4",
        "train.steps=1", "reward.num_workers=0", "logging.tensorboard=false",
        "logging.progress_bar=false", "logging.plot=false", "checkpoint.save_final=false",
        "data.max_prompt_len=1024"]


def cfg(tmp_path, *extra):
    from mindrl.config.loader import load_config

    return load_config(None, BASE + [f"logging.output_dir={tmp_path / 'run'}"] + list(extra))


def test_preflight_stops_on_unscorable_golds(tmp_path):
    from mindrl.trainer.prompts import build_streams

    f = write_jsonl(tmp_path / "noans.jsonl", [{"problem": q, "answer": ""} for q in Q])
    c = cfg(tmp_path, f"data.train_file={f}")
    with pytest.raises(DataError, match=r"noans.jsonl: field 'answer': reward 'accuracy' cannot "
                                        r"score 3 of the first 3 gold answers"):
        build_streams(c.data, 0, cfg=c)
    c = cfg(tmp_path, f"data.train_file={f}", "data.preflight_max_unscorable=1.0")
    build_streams(c.data, 0, cfg=c)       # the threshold is configurable


def test_eval_stops_on_unscorable_golds(tmp_path):
    from mindrl.data.benchmarks import load_benchmark

    # MATH-style rows whose final answer was left empty; the solution is another column
    f = write_jsonl(tmp_path / "math.jsonl", [{"problem": q, "answer": "", "solution": a}
                                              for q, a in zip(Q, A)])
    with pytest.raises(DataError, match=r"math.jsonl: field 'answer': the math grader cannot "
                                        r"score 3 of the first 3 gold answers"):
        load_benchmark(str(f))
    assert load_benchmark(str(f), answer_field="solution")[0]["answer"] == "72"


def test_preflight_shows_the_example(tmp_path):
    from mindrl.data.preflight import preflight

    c = cfg(tmp_path, "model.chat_template=qwen25-math-cot")
    p, rows = load_file(verl_gsm8k(tmp_path), "rl")
    lines = preflight(c, "rl", p, rows)
    assert lines[0].endswith("(3 rows): detected: verl (problem <- prompt, answer <- "
                             "reward_model.ground_truth, id <- extra_info.index)")
    assert lines[2] == "  gold answer: 72  (id 0)"
    assert lines[3].startswith("  prompt after template 'qwen25-math-cot': <|im_start|>system")


def test_sft_misspelled_response_field_fails_before_the_model(tmp_path):
    from mindrl.trainer.prompts import build_streams

    f = prompt_completion(tmp_path)
    c = cfg(tmp_path, f"data.train_file={f}", "data.response_field=complition")
    with pytest.raises(DataError, match=r"pc.jsonl: line 1: field 'complition': the row has no "
                                        r"key 'complition'; its keys are: prompt, completion"):
        build_streams(c.data, 0, cfg=c, job="sft")
    c = cfg(tmp_path, "data.train_file=arithmetic:digits=2", "data.response_field=teacher_")
    with pytest.raises(DataError, match=r"field 'teacher_' \(data.response_field\)"):
        build_streams(c.data, 0, cfg=c, job="sft")


# ----------------------------------------------------------------------------- one step
def _metrics(tmp_path):
    return [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("make", [verl_gsm8k, dapo_math_17k, skywork_or1, orz_json, areal_boba,
                                  harp])
def test_one_rl_step(tmp_path, make):
    from mindrl.trainer.rl import train

    train(cfg(tmp_path, f"data.train_file={make(tmp_path)}"))
    m = _metrics(tmp_path)
    assert len(m) == 1 and m[0]["reward/none"] == 0


@pytest.mark.slow
def test_most_rewards_none_stops_the_run(tmp_path, capsys):
    from mindrl.cli import main

    f = verl_gsm8k(tmp_path)
    code = main(["train", "grpo_tiny_demo"] + BASE + [
        f"data.train_file={f}", "model.path=builtin:tiny", f"logging.output_dir={tmp_path}/run",
        "reward.functions=[{name: 'test_dataset_shapes:none_unless_empty'}]",
        "validation.every=0"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"mindrl: error: {f}: step 1: reward 'none_unless_empty' could not "
                       "score 4 of 4 rollouts (more than 50%, data.step_max_unscorable); check "
                       "the gold answers in field 'answer' (data.answer_field) with `mindrl "
                       "data inspect`")
    assert not (tmp_path / "run" / "metrics.jsonl").exists() or not _metrics(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("make", [seed_pairwise, trl_conversational_pref])
def test_one_dpo_step(tmp_path, make):
    from mindrl.trainer.preference import train_preference

    train_preference(cfg(tmp_path, f"data.train_file={make(tmp_path)}"))
    assert len(_metrics(tmp_path)) == 1


@pytest.mark.slow
def test_one_sft_step_on_prompt_completion(tmp_path):
    from mindrl.trainer.sft import train_sft

    train_sft(cfg(tmp_path, f"data.train_file={prompt_completion(tmp_path)}"))
    assert _metrics(tmp_path)[0]["tokens"] > 0
