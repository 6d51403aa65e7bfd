"""The evaluation runner: bad input, templates, resume, outputs, the CLI end to end."""

import json
import shutil

import numpy as np
import pytest

from mindrl.data.io import DataError
from mindrl.eval.cli import main
from mindrl.eval.runner import TemplateMismatchWarning, run_eval
from mindrl.eval.settings import EvalError, EvalSettings
from mindrl.eval.testing import EngineFactory
from mindrl.types import Rollouts

ALL5 = "math500,aime24,aime25,amc23,gsm8k"


class FakeEngine:
    """Answers every prompt with a fixed text; records the prompts and sampling it saw."""

    def __init__(self, text="\\boxed{18}"):
        self.text, self.prompts, self.sampling = text, [], []

    def generate(self, prompt_ids, sampling):
        self.prompts += prompt_ids
        self.sampling.append(sampling)
        rows = len(prompt_ids) * sampling.n
        return Rollouts(prompt_ids=[p for p in prompt_ids for _ in range(sampling.n)],
                        response_ids=[[1, 2, 3]] * rows, logprobs=[np.zeros(3)] * rows,
                        finish_reasons=["stop"] * rows,
                        group_index=np.repeat(np.arange(len(prompt_ids)), sampling.n),
                        texts=[self.text] * rows)

    def close(self):
        pass


def _settings(tiny_model_dir, shared_data, tmp_path, **kw):
    base = dict(model=tiny_model_dir, benchmarks=["gsm8k"], limit=2, n=2, max_new_tokens=8,
                data_dir=str(shared_data / "eval"), output_dir=str(tmp_path / "run"), plot=False)
    base.update(kw)
    return EvalSettings(**base)


def _never(spec):
    raise AssertionError("the engine must not start on bad input")


def test_bad_model_dir_is_named_before_any_engine(tiny_model_dir, shared_data, tmp_path):
    broken = tmp_path / "ckpt"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "tokenizer.json").unlink()
    with pytest.raises(EvalError, match="tokenizer"):
        run_eval(_settings(str(broken), shared_data, tmp_path), engine_factory=_never)
    (broken / "config.json").unlink()
    with pytest.raises(EvalError, match="config.json"):
        run_eval(_settings(str(broken), shared_data, tmp_path), engine_factory=_never)
    with pytest.raises(EvalError, match="does not exist"):
        run_eval(_settings(str(tmp_path / "nope"), shared_data, tmp_path), engine_factory=_never)


def test_bad_benchmark_and_settings_fail_early(tiny_model_dir, shared_data, tmp_path):
    with pytest.raises(DataError, match="valid names: aime24, aime25, amc23, gsm8k, math500"):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path, benchmarks=["gsm9k"]),
                 engine_factory=_never)
    with pytest.raises(DataError, match="gsm8k_test.openai.jsonl"):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path, data_dir=str(tmp_path)),
                 engine_factory=_never)
    with pytest.raises(EvalError, match="top_p"):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path, top_p=0), engine_factory=_never)
    with pytest.raises(EvalError, match="unknown chat template"):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path, template="qwen"),
                 engine_factory=_never)


def test_fake_engine_metrics_and_outputs(tiny_model_dir, shared_data, tmp_path):
    fake = FakeEngine("so \\boxed{18}")       # GSM8K problem 0's answer is 18, problem 1's is 3
    res = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, temperature=0, plot=True),
                   engine_factory=lambda spec: fake, echo_table=False)
    m = res.results["benchmarks"]["gsm8k"]
    assert m["avg@2"] == 0.5 and m["pass@k"] == {"1": 0.5, "2": 0.5} and m["maj@k"]["2"] == 0.5
    assert fake.sampling[0].temperature == 0 and fake.sampling[0].n == 1   # greedy: copies
    assert len(fake.prompts) == 4
    lines = [json.loads(x) for x in (res.run_dir / "samples.jsonl").open()]
    assert len(lines) == 4
    assert {tuple(sorted(r)) for r in lines} == {tuple(sorted(
        ["benchmark", "problem_id", "sample_index", "settings_hash", "text", "extracted", "score",
         "length", "finish_reason", "grading"]))}
    assert [r["extracted"] for r in lines] == ["18"] * 4
    assert sorted(r["score"] for r in lines) == [0.0, 0.0, 1.0, 1.0]
    assert (res.run_dir / "lengths.png").stat().st_size > 1000
    assert "| gsm8k" in res.table


def test_template_recorded_by_training_is_the_default(tiny_model_dir, shared_data, tmp_path):
    from transformers import AutoTokenizer

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_model_dir, ckpt)
    (ckpt / "mindrl_meta.json").write_text(json.dumps({"chat_template": "qwen25-math-cot"}))
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    fake = FakeEngine()
    res = run_eval(_settings(str(ckpt), shared_data, tmp_path), engine_factory=lambda s: fake,
                   echo_table=False)
    assert res.results["template"] == "qwen25-math-cot" and res.results["template_warning"] is None
    assert tok.decode(fake.prompts[0]).startswith(
        "<|im_start|>system\nPlease reason step by step, and put your final answer within")

    fake2 = FakeEngine()
    with pytest.warns(TemplateMismatchWarning, match="qwen25-math-cot"):
        res2 = run_eval(_settings(str(ckpt), shared_data, tmp_path, template="none",
                                  output_dir=str(tmp_path / "run2")),
                        engine_factory=lambda s: fake2, echo_table=False)
    assert res2.results["template"] == "none" and "differs" in res2.results["template_warning"]
    assert tok.decode(fake2.prompts[0]).startswith("Janet")


def test_changed_grading_rules_regrade_without_regenerating(tiny_model_dir, shared_data,
                                                           tmp_path):
    fake = FakeEngine("<answer>18</answer>")
    res = run_eval(_settings(tiny_model_dir, shared_data, tmp_path), engine_factory=lambda s: fake,
                   echo_table=False)
    assert res.results["benchmarks"]["gsm8k"]["accuracy"] == 0.5
    res2 = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, extract_mode="boxed"),
                    engine_factory=_never, echo_table=False)
    assert res2.generated == 0 and res2.results["settings_hash"] == res.results["settings_hash"]
    assert res2.results["benchmarks"]["gsm8k"]["accuracy"] == 0.0
    assert res2.results["benchmarks"]["gsm8k"]["no_answer"] == 4


@pytest.mark.slow
def test_problem_text_reaches_the_grader(tiny_model_dir, shared_data, tmp_path):
    """Each sample is graded with its problem statement: the same answer, equal in value to
    both golds, is wrong where the problem asks to factor; a regrade with a tolerance (no new
    generation) keeps that and accepts the decimal of an irrational gold."""
    bench = tmp_path / "forms.jsonl"
    rows = [{"id": "f", "problem": "Factor $x^2-1$.", "answer": "(x-1)(x+1)"},
            {"id": "v", "problem": "What is $(x-1)(x+1)$?", "answer": "(x-1)(x+1)"}]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kw = dict(benchmarks=[str(bench)], n=1, grade_workers=0)
    res = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, **kw),
                   engine_factory=lambda s: FakeEngine("so \\boxed{x^2-1}"), echo_table=False)
    lines = [json.loads(x) for x in (res.run_dir / "samples.jsonl").open()]
    assert {r["problem_id"]: r["score"] for r in lines} == {"f": 0.0, "v": 1.0}
    rows[1] = {"id": "v", "problem": "What is the area of a unit circle?", "answer": "\\pi"}
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kw["output_dir"] = str(tmp_path / "run2")
    res = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, **kw),
                   engine_factory=lambda s: FakeEngine("so \\boxed{3.1416}"), echo_table=False)
    lines = [json.loads(x) for x in (res.run_dir / "samples.jsonl").open()]
    assert {r["problem_id"]: r["score"] for r in lines} == {"f": 0.0, "v": 0.0}
    res2 = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, approx_rel_tol=1e-4, **kw),
                    engine_factory=_never, echo_table=False)
    lines2 = [json.loads(x) for x in (res2.run_dir / "samples.jsonl").open()][len(lines):]
    assert res2.generated == 0
    assert {r["problem_id"]: r["score"] for r in lines2} == {"f": 0.0, "v": 1.0}


def test_settings_hash_covers_generation_only(tiny_model_dir, shared_data, tmp_path):
    def h(**kw):
        res = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, **kw),
                       engine_factory=lambda s: FakeEngine(), echo_table=False)
        return res.results["settings_hash"]

    base = h()
    assert h(limit=1, batch_size=3, extract_mode="boxed") == base
    assert h(temperature=0.7) != base
    assert h(seed=1) != base
    assert h(template="none") != base


def test_resume_generates_only_missing_samples(tiny_model_dir, shared_data, tmp_path):
    """Real tiny model + native engine. Interrupted after 2 of 4 chunks, the rerun generates
    exactly the missing samples and (greedy) matches an uninterrupted run sample for sample."""
    kw = dict(benchmarks=["aime24", "amc23"], n=3, batch_size=3, temperature=0.0,
              max_new_tokens=12)
    first = EngineFactory(interrupt_after=2)
    with pytest.raises(KeyboardInterrupt):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path, **kw), engine_factory=first)
    path = tmp_path / "run" / "samples.jsonl"
    assert first.rollouts == 6 and len(path.read_text().splitlines()) == 6

    second = EngineFactory()
    res = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, **kw), engine_factory=second,
                   echo_table=False)
    assert second.rollouts == 6 and res.generated == 6
    assert len(path.read_text().splitlines()) == 12

    third = EngineFactory()
    res_again = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, **kw),
                         engine_factory=third, echo_table=False)
    assert third.engines == [] and res_again.generated == 0   # nothing left: no engine at all

    fresh = run_eval(_settings(tiny_model_dir, shared_data, tmp_path, output_dir=str(
        tmp_path / "fresh"), **kw), echo_table=False)
    texts = lambda d: sorted((r["benchmark"], r["problem_id"], r["sample_index"], r["text"])  # noqa: E731
                             for r in map(json.loads, (d / "samples.jsonl").open()))
    assert texts(res.run_dir) == texts(fresh.run_dir)
    assert res.results["benchmarks"] == fresh.results["benchmarks"]


def test_cli_end_to_end_all_five_benchmarks(tiny_model_dir, shared_data, tmp_path, capsys):
    out_dir = tmp_path / "e2e"
    try:                                   # the top-level `mindrl` CLI, once it wires eval in
        from mindrl.cli import main as mindrl_main
    except ImportError:
        mindrl_main = main
    rc = mindrl_main(["eval", tiny_model_dir, "--benchmarks", ALL5, "--limit", "2", "--n", "2",
               "--max-new-tokens", "16", "--data-dir", str(shared_data / "eval"),
               "--output-dir", str(out_dir), "--seed", "3"])
    assert rc == 0
    out = capsys.readouterr().out
    header = [ln for ln in out.splitlines() if ln.startswith("| benchmark")]
    assert header and "avg@n" in header[0] and "pass@1" in header[0] and "maj@2" in header[0]
    for name in ALL5.split(","):
        row = [ln for ln in out.splitlines() if ln.startswith(f"| {name} ")]
        assert len(row) == 1 and row[0].split("|")[2].strip() == "2"
    results = json.loads((out_dir / "results.json").read_text())
    assert list(results["benchmarks"]) == ALL5.split(",")
    for m in results["benchmarks"].values():
        assert m["problems"] == 2 and m["n"] == 2 and m["samples"] == 4
        assert set(m["pass@k"]) == {"1", "2"} and 0 <= m["accuracy"] <= 1
        assert set(m["length"]) == {"all", "correct", "wrong"}
        assert 0 < m["length"]["all"]["mean"] <= 16
    samples = [json.loads(x) for x in (out_dir / "samples.jsonl").open()]
    assert len(samples) == 20
    assert {r["finish_reason"] for r in samples} <= {"stop", "length"}
    assert (out_dir / "lengths.png").is_file() and (out_dir / "table.md").is_file()

    # compare against a second run (greedy) side by side
    rc = main(["eval", tiny_model_dir, "--benchmarks", "gsm8k,amc23", "--limit", "2", "--n", "2",
               "--max-new-tokens", "16", "--data-dir", str(shared_data / "eval"),
               "--output-dir", str(tmp_path / "b"), "--temperature", "0", "--no-plot"])
    assert rc == 0
    capsys.readouterr()
    assert main(["eval", "compare", str(out_dir), str(tmp_path / "b")]) == 0
    cmp_out = capsys.readouterr().out
    assert "| benchmark | metric" in cmp_out and "B - A" in cmp_out
    assert "| gsm8k     | accuracy" in cmp_out and "| math500   | accuracy" in cmp_out


def test_cli_errors_and_yaml(tiny_model_dir, shared_data, tmp_path, capsys):
    assert main(["eval", str(tmp_path / "missing"), "--data-dir", str(shared_data)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["eval", "compare", str(tmp_path)]) == 2
    assert main(["eval", "compare", str(tmp_path), str(tmp_path)]) == 2
    assert "results.json" in capsys.readouterr().err
    cfg = tmp_path / "e.yaml"
    cfg.write_text("eval:\n  benchmarks: aime24\n  n: 3\n  bogus: 1\n")
    assert main(["eval", tiny_model_dir, "--config", str(cfg)]) == 2
    assert "bogus" in capsys.readouterr().err

    import argparse

    from mindrl.eval.cli import add_eval_parser, settings_from_args

    parser = argparse.ArgumentParser()
    add_eval_parser(parser.add_subparsers(dest="cmd"))
    cfg.write_text("benchmarks: aime24,amc23\nn: 3\ntemperature: 0.2\n")
    s = settings_from_args(parser.parse_args(["eval", "M", "--config", str(cfg), "--n", "5"]))
    assert s.benchmarks == ["aime24", "amc23"] and s.n == 5 and s.temperature == 0.2
    assert s.model == "M" and s.top_p == 0.95


@pytest.mark.slow
def test_mindspore_backend_native_engine_matches_torch_greedy(tiny_model_dir, shared_data,
                                                               tmp_path, capsys):
    """`--backend mindspore` samples with the MindSpore native sampler; greedy output equals the
    torch backend's on the same weights."""
    from mindrl.cli import main as mindrl_main

    texts = {}
    for backend in ("torch", "mindspore"):
        out_dir = tmp_path / backend
        rc = mindrl_main(["eval", tiny_model_dir, "--benchmarks", "gsm8k", "--limit", "3",
                          "--n", "1", "--temperature", "0", "--max-new-tokens", "12",
                          "--data-dir", str(shared_data / "eval"), "--output-dir", str(out_dir),
                          "--backend", backend, "--no-plot"])
        assert rc == 0
        samples = [json.loads(x) for x in (out_dir / "samples.jsonl").open()]
        assert len(samples) == 3
        texts[backend] = [s["text"] for s in sorted(samples, key=lambda s: s["problem_id"])]
    capsys.readouterr()
    assert texts["torch"] == texts["mindspore"]


@pytest.mark.slow
def test_min_p_reaches_the_sampler(tiny_model_dir, shared_data, tmp_path, capsys):
    """--min-p keeps only tokens at least min_p times as likely as the most likely one: at
    0.999999 sampling at temperature 1 gives the greedy answers, without it not; a run without
    min-p keeps the settings hash it had before the option existed."""
    common = [tiny_model_dir, "--benchmarks", "gsm8k", "--limit", "3", "--max-new-tokens", "8",
              "--data-dir", str(shared_data / "eval"), "--no-plot", "--grade-workers", "0"]

    def texts(name, *extra):
        assert main(["eval", *common, "--output-dir", str(tmp_path / name), *extra]) == 0
        rows = [json.loads(x) for x in (tmp_path / name / "samples.jsonl").open()]
        return [r["text"] for r in sorted(rows, key=lambda r: (r["problem_id"],
                                                               r["sample_index"]))]

    greedy = texts("greedy", "--temperature", "0", "--n", "1")
    minp = texts("minp", "--temperature", "1", "--n", "2", "--min-p", "0.999999", "--seed", "1")
    plain = texts("plain", "--temperature", "1", "--n", "2", "--seed", "1")
    assert minp == [t for t in greedy for _ in range(2)]
    assert plain != minp
    eng = FakeEngine()
    run_eval(_settings(tiny_model_dir, shared_data, tmp_path, min_p=0.05),
             engine_factory=lambda s: eng, echo_table=False)
    assert {s.min_p for s in eng.sampling} == {0.05}
    from mindrl.eval.settings import settings_hash
    gen = dict(model="m", model_fingerprint="f", template="t", system_prompt=None, n=1,
               temperature=0.6, top_p=0.95, top_k=-1, max_new_tokens=8, seed=0,
               engine="native", backend="torch", dtype="float32")
    assert settings_hash(gen) == settings_hash({**gen, "min_p": 0.0}) != \
        settings_hash({**gen, "min_p": 0.05})
    with pytest.raises(EvalError, match=r"min_p=1.0 must be in \[0, 1\)"):
        run_eval(_settings(tiny_model_dir, shared_data, tmp_path, min_p=1.0),
                 engine_factory=_never, echo_table=False)
