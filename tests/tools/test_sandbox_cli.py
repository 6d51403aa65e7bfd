"""`mindrl sandbox run FILE.py`: what a rollout's tool call would print, and the verdict."""

from mindrl.cli import main


def test_sandbox_run_prints_output_and_verdict(tmp_path, capsys):
    f = tmp_path / "snippet.py"
    f.write_text("print(sum(range(10)))\nimport sys\nprint('warn', file=sys.stderr)\n")
    assert main(["sandbox", "run", str(f), "--timeout", "5"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == ["--- stdout ---", "45", "--- stderr ---", "warn",
                                    out.out.splitlines()[-1]]
    assert out.out.splitlines()[-1].startswith("--- verdict: ok;")
    assert "sandbox isolation:" in out.err


def test_sandbox_run_limits_from_flags(tmp_path, capsys):
    f = tmp_path / "bomb.py"
    f.write_text("x = bytearray(300 * 2**20)\n")
    assert main(["sandbox", "run", str(f), "--memory", "200", "--timeout", "10"]) == 1
    assert "--- verdict: memory (MemoryError under 200 MB)" in capsys.readouterr().out


def test_sandbox_run_missing_file_is_a_user_error(tmp_path, capsys):
    assert main(["sandbox", "run", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mindrl: error: sandbox run ") and "No such file" in err
