"""``mindrl analyze lengths`` on eval runs with known lengths, and ``mindrl data clean`` on rows
with known links / CJK text (plus the counts docs/analysis.md quotes for the shared training file)."""

import json

import pytest

from mindrl.analyze.lengths import compare_lengths, read_eval_lengths
from mindrl.analyze.rollouts import AnalyzeError
from mindrl.cli import main
from mindrl.data.clean import clean_rows
from mindrl.data.io import DataError


def _eval_run(path, samples, shash="abc"):
    path.mkdir(parents=True)
    (path / "settings.json").write_text(json.dumps({"settings_hash": shash, "settings": {}}))
    lines = []
    for b, pid, j, score, length, fin in samples:
        lines.append(json.dumps({"benchmark": b, "problem_id": pid, "sample_index": j,
                                 "settings_hash": shash, "text": "", "score": score,
                                 "length": length, "finish_reason": fin}))
    (path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_lengths_split_and_table(tmp_path, capsys):
    before = _eval_run(tmp_path / "before", [
        ("aime24", "1", 0, 1.0, 100, "stop"), ("aime24", "1", 1, 0.0, 300, "stop"),
        ("aime24", "2", 0, 1.0, 500, "length"),          # truncated wins over the score
        ("aime24", "2", 1, None, 200, "stop"),           # ungradeable counts as wrong
        ("gsm8k", "7", 0, 1.0, 40, "stop")])
    with (before / "samples.jsonl").open("a") as f:      # another settings hash: ignored
        f.write(json.dumps({"benchmark": "aime24", "problem_id": "9", "sample_index": 0,
                            "settings_hash": "zzz", "score": 1.0, "length": 9999,
                            "finish_reason": "stop"}) + "\n")
    after = _eval_run(tmp_path / "after", [
        ("aime24", "1", 0, 1.0, 1000, "stop"), ("aime24", "1", 1, 1.0, 2000, "stop"),
        ("aime24", "2", 0, 0.0, 4096, "length"), ("aime24", "2", 1, 0.0, 3000, "stop")])
    got = read_eval_lengths(before)
    assert got["aime24"] == {"correct": [100], "wrong": [300, 200], "truncated": [500]}
    out = tmp_path / "out"
    assert main(["analyze", "lengths", str(before), str(after), "--labels", "base,rl",
                 "-o", str(out), "--benchmarks", "aime24"]) == 0
    table = (out / "lengths.md").read_text()
    lines = [line for line in table.splitlines() if line.startswith("| base") or
             line.startswith("| rl")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    # run, bench, samples, mean, correct n/mean, wrong n/mean, truncated n/mean
    assert cells[0] == ["base", "aime24", "4", "275", "1", "100", "2", "250", "1", "500"]
    assert cells[1] == ["rl", "aime24", "4", "2524", "2", "1500", "1", "3000", "1", "4096"]
    assert "gsm8k" not in table
    assert (out / "lengths.png").read_bytes()[:4] == b"\x89PNG"
    assert table.strip() in capsys.readouterr().out


def test_lengths_bad_input(tmp_path, capsys):
    with pytest.raises(AnalyzeError, match="eval run not found: .*nope"):
        read_eval_lengths(tmp_path / "nope")
    run = _eval_run(tmp_path / "r", [("gsm8k", "1", 0, 1.0, 5, "stop")])
    with pytest.raises(AnalyzeError, match="none of the benchmarks aime24; the run has gsm8k"):
        read_eval_lengths(run, ["aime24"])
    with pytest.raises(AnalyzeError, match="--labels gives 1 names for 2 runs"):
        compare_lengths([run, run], ["a"], out_dir=tmp_path / "o")
    assert main(["analyze", "lengths", str(tmp_path / "nope"), "-o", str(tmp_path / "o")]) == 2
    assert "eval run not found" in capsys.readouterr().err


ROWS = [
    {"problem": "What is 1+1?", "answer": "2"},
    {"problem": "See https://example.com/p1 for the figure.", "answer": "3"},
    {"problem": "求 1+2 的值。", "answer": "3"},
    {"problem": "Visit www.aops.com and 计算", "answer": "4"},
    {"problem": "Plain text", "answer": "source: artofproblemsolving.com/wiki"},
    {"problem": "Decimals like 3.14 and e.g. x.y are fine; so is 5.com-pute", "answer": "1"},
]


def test_clean_rows_counts_and_reasons():
    kept, counts, shown = clean_rows(ROWS, drop_urls=True, drop_cjk=True)
    assert [r["answer"] for r in kept] == ["2", "1"]
    assert counts == {"rows": 6, "kept": 2, "dropped": 4, "url": 3, "cjk": 2, "both": 1}
    assert shown["url"][0].startswith("row 2 problem: 'https://example.com/p1")
    assert shown["cjk"][0].startswith("row 3 problem:")
    # only the problem field: the link in row 5's answer no longer counts
    kept, counts, _ = clean_rows(ROWS, drop_urls=True, drop_cjk=False, fields=["problem"])
    assert counts["url"] == 2 and counts["cjk"] == 0 and len(kept) == 4
    kept, counts, _ = clean_rows(ROWS, drop_urls=False, drop_cjk=True)
    assert counts["dropped"] == 2 and len(kept) == 4
    with pytest.raises(DataError, match="row 1 has no field 'question'"):
        clean_rows(ROWS, fields=["question"], source="x.jsonl")
    with pytest.raises(DataError, match="nothing to clean"):
        clean_rows(ROWS, drop_urls=False, drop_cjk=False)


def test_clean_cli(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS))
    dst = tmp_path / "out.jsonl"
    assert main(["data", "clean", str(src), str(dst), "--drop-urls", "--drop-cjk",
                 "--field", "problem,answer"]) == 0
    out = capsys.readouterr().out
    assert "2 of 6 rows kept" in out and "web link 3, CJK text 2 (both 1)" in out
    assert [json.loads(x)["answer"] for x in dst.read_text().splitlines()] == ["2", "1"]
    assert main(["data", "clean", str(tmp_path / "none.jsonl"), str(dst), "--drop-urls"]) == 2
    assert "data file not found" in capsys.readouterr().err


def test_clean_counts_on_shared_training_files(shared_data):
    """The counts the pipeline walk-through of docs/analysis.md quotes: both shared training files are
    already free of links and CJK text (every string field searched)."""
    from mindrl.data.io import read_rows

    for name, n in (("simplelr_qwen_level3to5_train.simplerl_pr57.jsonl", 8523),
                    ("gsm8k_train.openai.jsonl", 7473)):
        _, counts, _ = clean_rows(read_rows(shared_data / "train" / name))
        assert counts == {"rows": n, "kept": n, "dropped": 0, "url": 0, "cjk": 0, "both": 0}
