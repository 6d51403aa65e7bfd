"""Curation of eval samples: difficulty filter, preference pairs, rejection-sampling set, the CLI.

The hand-made run below has five problems with four samples each (h1 = the run's settings hash):

    problem  scores            notes
    p0       1 1 1 1           texts "x = 1", "x =  1" (same after whitespace), "x=1", "x = 2 so 1"
    p1       0 0 0 0           sample 3 truncated; a stale line of another settings hash says
                               sample 0 scored 1 (ignored)
    p2       1 0 1 0           sample 2 repeats sample 0; sample 3 truncated
    p3       1 0 0 None        the correct sample 0 is truncated; sample 3 ungradeable
    p4       1 1 1 0           lengths 30, 5, 12 / 8; sample 3 first graded 1, regraded 0
"""

import argparse
import json

import pytest

from mindrl.data import DataError
from mindrl.data.cli import add_data_parser
from mindrl.data.tools import (build_preference_pairs, build_rejection_sampling_set,
                               filter_by_difficulty, load_eval_samples)

S = "stop"
T = "length"
SAMPLES = {  # problem -> [(text, score, length, finish_reason)]
    "p0": [("x = 1", 1, 3, S), ("x =  1", 1, 3, S), ("x=1", 1, 2, S), ("x = 2 so 1", 1, 5, S)],
    "p1": [("no", 0, 1, S), ("nope", 0, 1, S), ("nah", 0, 1, S), ("never", 0, 1, T)],
    "p2": [("A  correct", 1, 10, S), ("wrong1", 0, 5, S), ("A correct", 1, 9, S),
           ("wrong2", 0, 20, T)],
    "p3": [("cut", 1, 40, T), ("bad1", 0, 6, S), ("bad2", 0, 7, S), ("timeout", None, 4, S)],
    "p4": [("long", 1, 30, S), ("short", 1, 5, S), ("mid", 1, 12, S), ("oops", 1, 8, S)],
}


def _rec(pid, j, text, score, length, reason, shash="h1"):
    return {"benchmark": "probs", "problem_id": pid, "sample_index": j, "settings_hash": shash,
            "text": text, "extracted": None, "score": score, "length": length,
            "finish_reason": reason, "grading": "auto"}


def _lines():
    out = [_rec(p, j, *s) for p, ss in SAMPLES.items() for j, s in enumerate(ss)]
    out.append(_rec("p1", 0, "stale", 1, 1, S, shash="old"))        # another run's sample
    out.append(_rec("p4", 3, "oops", 0, 8, S))                       # regraded: newest wins
    return out


@pytest.fixture
def run_dir(tmp_path):
    probs = tmp_path / "probs.jsonl"
    probs.write_text("".join(json.dumps({"id": p, "problem": f"Q{p[1]}?", "answer": p[1]}) + "\n"
                             for p in SAMPLES))
    run = tmp_path / "run"
    run.mkdir()
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _lines()))
    (run / "settings.json").write_text(json.dumps(
        {"settings": {"benchmarks": [str(probs)], "data_dir": None}, "settings_hash": "h1"}))
    return run


def _read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_load_groups_by_problem_with_text_and_answer(run_dir):
    s = load_eval_samples(run_dir)
    assert list(s.groups) == [("probs", p) for p in SAMPLES]
    assert [r["text"] for r in s.groups[("probs", "p1")]] == ["no", "nope", "nah", "never"]
    assert [r["score"] for r in s.groups[("probs", "p4")]] == [1, 1, 1, 0]
    assert s.problems[("probs", "p2")] == {"problem": "Q2?", "answer": "2"}
    assert load_eval_samples(run_dir / "samples.jsonl").groups == s.groups


def test_filter_by_difficulty(run_dir, tmp_path):
    res = filter_by_difficulty(run_dir, 0.2, 0.8, out=tmp_path / "out" / "mid.jsonl")
    assert res.rows == [
        {"problem": "Q2?", "answer": "2", "pass_rate": 0.5, "n": 4, "benchmark": "probs",
         "problem_id": "p2"},
        {"problem": "Q3?", "answer": "3", "pass_rate": 0.25, "n": 4, "benchmark": "probs",
         "problem_id": "p3"},
        {"problem": "Q4?", "answer": "4", "pass_rate": 0.75, "n": 4, "benchmark": "probs",
         "problem_id": "p4"}]
    assert res.counts == {"problems": 5, "kept": 3, "too_easy": 1, "too_hard": 1}
    assert _read(res.out) == res.rows
    assert [p.name for p in res.out.parent.iterdir()] == ["mid.jsonl"]     # no temp file left
    assert [r["problem_id"] for r in filter_by_difficulty(run_dir, 0.0, 0.25).rows] == \
        ["p1", "p3"]
    assert len(filter_by_difficulty(run_dir, 0.0, 1.0).rows) == 5
    with pytest.raises(ValueError, match="lo=0.9, hi=0.1"):
        filter_by_difficulty(run_dir, 0.9, 0.1)


def test_preference_pairs(run_dir):
    res = build_preference_pairs(run_dir, prefer_shorter=True, solved_pairs=0)
    assert [(r["problem_id"], r["chosen"], r["rejected"]) for r in res.rows] == \
        [("p2", "A correct", "wrong1"), ("p4", "short", "oops")]
    assert res.rows[0] == {"prompt": "Q2?", "chosen": "A correct", "rejected": "wrong1",
                           "problem": "Q2?", "answer": "2", "benchmark": "probs",
                           "problem_id": "p2", "pair_type": "correct_vs_wrong",
                           "chosen_index": 2, "rejected_index": 1,
                           "chosen_length": 9, "rejected_length": 5}
    assert res.counts == {"problems": 5, "problems_paired": 2, "pairs": 2, "no_correct": 2,
                          "no_wrong": 1, "solved_problems": 0, "solved_pairs": 0,
                          "dropped_truncated": 3}

    # no cap, truncated kept: each sample in at most one pair; p3's ungradeable sample unused
    every = build_preference_pairs(run_dir, 0, prefer_shorter=True, drop_truncated=False,
                                   solved_pairs=0)
    assert [(r["problem_id"], r["chosen_index"]) for r in every.rows] == \
        [("p2", 2), ("p2", 0), ("p3", 0), ("p4", 1)]
    assert sorted(r["rejected_index"] for r in every.rows if r["problem_id"] == "p2") == [1, 3]
    assert next(r["rejected"] for r in every.rows if r["problem_id"] == "p3") in {"bad1", "bad2"}

    # without prefer_shorter: seeded per-problem shuffles, reproducible
    a = build_preference_pairs(run_dir, seed=5, solved_pairs=0).rows
    assert a == build_preference_pairs(run_dir, seed=5, solved_pairs=0).rows
    assert {r["chosen"] for r in a if r["problem_id"] == "p4"} <= {"long", "short", "mid"}
    chosen_p4 = {build_preference_pairs(run_dir, seed=s, solved_pairs=0).rows[1]["chosen"]
                 for s in range(12)}
    assert chosen_p4 == {"long", "short", "mid"}


def test_solved_problems_pair_short_against_long(run_dir):
    """The seed log's rule: p0 (every sample correct; lengths 3, 3, 2, 5 for samples 0-3) gives
    its 2 shortest (2: "x=1", 3: "x = 1") against its 2 longest (3: "x =  1", 5: "x = 2 so 1"),
    2 x 2 combinations less the equal-length one: (2,3), (2,5), (3,5)."""
    res = build_preference_pairs(run_dir, prefer_shorter=True)       # default solved_pairs=2
    solved = [r for r in res.rows if r["pair_type"] == "short_vs_long"]
    assert [(r["chosen_index"], r["rejected_index"]) for r in solved] == [(2, 1), (2, 3), (0, 3)]
    assert all(r["problem_id"] == "p0" and r["chosen_length"] < r["rejected_length"]
               for r in solved)
    assert res.counts["solved_problems"] == 1 and res.counts["solved_pairs"] == 3
    assert res.counts["pairs"] == 5                  # + p2 and p4's correct-vs-wrong pairs
    one = build_preference_pairs(run_dir, prefer_shorter=True, solved_pairs=1)
    assert [(r["chosen_index"], r["rejected_index"]) for r in one.rows
            if r["pair_type"] == "short_vs_long"] == [(2, 3)]


def test_pairwise_format_is_what_the_pairwise_loader_reads(run_dir, tmp_path):
    from mindrl.data.formats import load_file

    res = build_preference_pairs(run_dir, prefer_shorter=True, pair_format="pairwise",
                                 out=tmp_path / "pw.jsonl")
    std = build_preference_pairs(run_dir, prefer_shorter=True)
    for r, s in zip(res.rows, std.rows):
        assert {"id", "prompt", "completion_1", "completion_2", "preferred"} <= set(r)
        chosen = r[r["preferred"]]                   # the log's format names the column
        rejected = r["completion_2" if r["preferred"] == "completion_1" else "completion_1"]
        assert (chosen, rejected) == (s["chosen"], s["rejected"])
    assert {r["preferred"] for r in res.rows} == {"completion_1", "completion_2"}  # drawn per pair
    assert len({r["id"] for r in res.rows}) == len(res.rows)
    plan, rows = load_file(tmp_path / "pw.jsonl", "pref", "auto", {}, 0)
    assert plan.format.name == "pairwise"
    assert [(x["chosen"], x["rejected"]) for x in rows] == \
        [(s["chosen"], s["rejected"]) for s in std.rows]


def test_rejection_sampling_set(run_dir):
    res = build_rejection_sampling_set(run_dir)
    assert [(r["problem_id"], r["response"]) for r in res.rows] == [
        ("p0", "x = 1"), ("p0", "x=1"), ("p0", "x = 2 so 1"), ("p2", "A  correct"),
        ("p4", "long"), ("p4", "short"), ("p4", "mid")]
    assert res.rows[3] == {"problem": "Q2?", "response": "A  correct", "answer": "2",
                           "benchmark": "probs", "problem_id": "p2", "sample_index": 0,
                           "length": 10, "pass_rate": 0.5}
    assert res.counts == {"problems": 5, "out_of_bounds": 0, "problems_kept": 3, "correct": 10,
                          "dropped_truncated": 1, "dropped_duplicates": 2, "dropped_cap": 0,
                          "rows": 7}
    capped = build_rejection_sampling_set(run_dir, max_per_problem=1)
    assert [r["response"] for r in capped.rows] == ["x = 1", "A  correct", "long"]
    assert capped.counts["dropped_cap"] == 4
    loose = build_rejection_sampling_set(run_dir, dedupe=False, drop_truncated=False)
    assert len(loose.rows) == 10 and "cut" in {r["response"] for r in loose.rows}


def test_bad_samples_files_name_file_line_and_field(run_dir, tmp_path):
    path = run_dir / "samples.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines) + '\n{"benchmark": "pro')          # torn last line: skipped
    assert len(load_eval_samples(run_dir).groups) == 5
    rec = json.loads(lines[2])
    del rec["score"]
    path.write_text("\n".join(lines[:2] + [json.dumps(rec)] + lines[3:]) + "\n")
    with pytest.raises(DataError, match=r"samples.jsonl:3: sample has no field 'score'"):
        load_eval_samples(run_dir)
    path.write_text("\n".join(lines[:2] + ["{oops"] + lines[3:]) + "\n")
    with pytest.raises(DataError, match=r"samples.jsonl:3: not valid JSON"):
        load_eval_samples(run_dir)

    loose = tmp_path / "loose.jsonl"                     # no settings.json beside it
    loose.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="2 different settings \\(h1, old\\)"):
        load_eval_samples(loose, problems=str(tmp_path / "probs.jsonl"))
    with pytest.raises(DataError, match="no settings.json.*--problems"):
        load_eval_samples(loose, settings_hash="h1")
    s = load_eval_samples(loose, problems=str(tmp_path / "probs.jsonl"), settings_hash="h1")
    assert len(s.groups) == 5
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "p0", "problem": "?", "answer": "0"}) + "\n")
    with pytest.raises(DataError, match="benchmark 'probs' problem_id 'p0' has no problem"):
        load_eval_samples(loose, problems=str(other), settings_hash="h1")
    with pytest.raises(DataError, match="samples file not found"):
        load_eval_samples(tmp_path / "nowhere")


def _cli(argv):
    parser = argparse.ArgumentParser(prog="mindrl")
    add_data_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_one_line_summaries(run_dir, tmp_path, capsys):
    out = tmp_path / "f.jsonl"
    assert _cli(["data", "filter", str(run_dir), "--lo", "0.2", "--hi", "0.8", "-o", str(out)]) == 0
    assert capsys.readouterr().out == (f"data filter: 3 rows -> {out} (problems=5, kept=3, "
                                       f"too_easy=1, too_hard=1)\n")
    assert len(_read(out)) == 3

    out = tmp_path / "p.jsonl"
    assert _cli(["data", "pairs", str(run_dir / "samples.jsonl"), "-o", str(out),
                 "--max-pairs", "0", "--keep-truncated", "--prefer-shorter"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("data pairs: 7 rows") and "pairs=7" in line and line.count("\n") == 1
    assert "solved_pairs=3" in line
    assert {"prompt", "chosen", "rejected", "answer"} <= set(_read(out)[0])

    out = tmp_path / "r.jsonl"
    assert _cli(["data", "rejection", str(run_dir), "-o", str(out), "--max-per-problem", "2"]) == 0
    assert "data rejection: 5 rows" in capsys.readouterr().out
    assert [r["response"] for r in _read(out)][:2] == ["x = 1", "x=1"]

    assert _cli(["data", "filter", str(tmp_path / "nope"), "--lo", "0", "--hi", "1", "-o",
                 str(out)]) == 2
    assert "mindrl data filter: error: samples file not found" in capsys.readouterr().err


def test_on_samples_written_by_the_eval_tool(tiny_model_dir, shared_data, tmp_path):
    """The real eval runner (tiny model's tokenizer, an engine that answers 18 then 3 for each
    prompt) writes samples.jsonl + settings.json; GSM8K problem 0's answer is 18, problem 1's 3."""
    import numpy as np

    from mindrl.eval.runner import run_eval
    from mindrl.eval.settings import EvalSettings
    from mindrl.types import Rollouts

    class TwoAnswers:
        def generate(self, prompt_ids, sampling):
            rows = len(prompt_ids) * sampling.n
            return Rollouts(prompt_ids=[p for p in prompt_ids for _ in range(sampling.n)],
                            response_ids=[[1, 2, 3]] * rows, logprobs=[np.zeros(3)] * rows,
                            finish_reasons=["stop"] * rows,
                            group_index=np.repeat(np.arange(len(prompt_ids)), sampling.n),
                            texts=["so \\boxed{18}", "so \\boxed{3}"] * (rows // 2))

    settings = EvalSettings(model=tiny_model_dir, benchmarks=["gsm8k"], limit=2, n=2,
                            max_new_tokens=8, data_dir=str(shared_data / "eval"),
                            output_dir=str(tmp_path / "run"), plot=False, grade_workers=0)
    run = run_eval(settings, engine_factory=lambda spec: TwoAnswers(), echo_table=False).run_dir
    assert filter_by_difficulty(run, 0.5, 0.5).counts["kept"] == 2
    pairs = build_preference_pairs(run).rows
    assert [(p["chosen"], p["rejected"], p["answer"]) for p in pairs] == \
        [("so \\boxed{18}", "so \\boxed{3}", "18"), ("so \\boxed{3}", "so \\boxed{18}", "3")]
    assert pairs[0]["prompt"].startswith("Janet")
    sft = build_rejection_sampling_set(run).rows
    assert [(r["problem_id"], r["response"]) for r in sft] == [("0", "so \\boxed{18}"),
                                                               ("1", "so \\boxed{3}")]


def test_resample_selection_keeps_the_never_solved_when_asked():
    """data.resample.keep_unsolved: the log's drop-all-correct rule keeps pass rate 0 too."""
    from mindrl.trainer.stages import select_rated

    rates = {"none": 0.0, "low": 0.125, "mid": 0.5, "all": 1.0}
    assert select_rated(rates, 0.0, 1.0) == (["low", "mid"], 1, 1)
    assert select_rated(rates, 0.0, 1.0, keep_unsolved=True) == (["none", "low", "mid"], 1, 0)
    assert select_rated(rates, 0.2, 1.0, keep_unsolved=True) == (["none", "mid"], 1, 1)
    assert select_rated(rates, 0.0, 0.5, keep_unsolved=True) == (["none", "low"], 2, 0)
