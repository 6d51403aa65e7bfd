"""README.md and the docs/ pages stay true: every fenced command runs in a cheap form, every recipe
in their tables resolves, every option they name exists, and their figures are still found (and
the instant ones still hold).

How a command is run is declared in the page itself, in an HTML comment above its block
(``<!-- readme-test ... -->``; the syntax is in tests/readme_doc.py). A command without a
declared form FAILS, with the exact line to add to the comment: new sections cannot slip in
untested, and a mindrl command is never silently reduced to ``--help``. ``mindrl`` commands run
in process (``mindrl.cli.main``) in a fresh temporary directory; ``mindrl launch`` (it execs the
worker) and non-mindrl lines run with bash from the checkout root.

Substitutions in ``$ COMMAND`` forms: ``{small}`` = the overrides of a 1-step builtin:tiny run
writing to ``{tmp}/run``; ``{run}`` = RUN_DIR of a real 2-step tiny run (conftest ``tiny_run``);
``{ckpt}`` = its ``checkpoints/step_000002``; ``{evalrun}`` = a tiny ``mindrl eval`` run
directory; ``{files}`` = small data files made below (mine.jsonl, train.parquet, rft.jsonl,
pairs.jsonl, mine_dup.yaml); ``{tmp}`` = this command's own temporary directory.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import readme_doc as doc

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = doc.doc_pages(REPO)
BLOCKS = [b for p in PAGES for b in doc.read_blocks(p, p.relative_to(REPO).as_posix())]


def _all_text() -> str:
    """README.md and every docs page, one after the other."""
    return "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
SECTIONS = ("model", "data", "rollout", "algorithm", "reward", "train", "checkpoint", "validation",
            "logging", "distributed", "preference", "mindformers")
SMALL = ("model.path=builtin:tiny train.steps=1 train.prompts_per_step=2 rollout.n=2 "
         "rollout.max_new_tokens=4 validation.every=0 checkpoint.save_final=false "
         "logging.plot=false logging.tensorboard=false logging.progress_bar=false "
         "reward.num_workers=0 logging.output_dir={tmp}/run")


def _cases():
    out = []
    for block in BLOCKS:
        forms, _ = doc.parse_annotation(block.annotation or "")
        for cmd in doc.commands(block):
            form = doc.form_for(cmd, forms)
            marks = [pytest.mark.slow] if form is not None and form.slow else []
            out.append(pytest.param(cmd, form, marks=marks,
                                    id=f"{block.page}:L{cmd.line}:{cmd.text[:40]}"))
    return out


# ------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def readme_files(tmp_path_factory):
    """Small stand-ins for the files the docs' commands name."""
    import json

    from mindrl.cli import main

    d = tmp_path_factory.mktemp("readme_files")
    rows = [{"id": f"q{i}", "problem": f"{i}+{i + 1}=", "answer": str(2 * i + 1)} for i in range(6)]
    (d / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["data", "convert", str(d / "mine.jsonl"), "-o", str(d / "train.parquet"),
                 "--to", "verl"]) == 0
    (d / "rft.jsonl").write_text("".join(json.dumps({"problem": r["problem"],
                                                     "response": r["answer"]}) + "\n"
                                         for r in rows))
    (d / "pairs.jsonl").write_text("".join(json.dumps({"prompt": r["problem"],
                                                       "chosen": r["answer"],
                                                       "rejected": r["answer"] + "0"}) + "\n"
                                           for r in rows))
    # Troubleshooting's example of a file without an answer field
    (d / "bad.jsonl").write_text(json.dumps({"question": "1+1=", "answr": "2"}) + "\n")
    # the docs' example of a duplicated key: lr on lines 3 and 4 under train:
    (d / "mine_dup.yaml").write_text("extends: grpo_tiny_demo\ntrain:\n  lr: 1.0e-6\n"
                                     "  lr: 2.0e-6\n")
    return d


@pytest.fixture(scope="session")
def tiny_eval_run(tmp_path_factory, tiny_dir, shared_data):
    from mindrl.cli import main

    out = tmp_path_factory.mktemp("readme_eval") / "run"
    env = {"MINDRL_CACHE": str(Path(tiny_dir).parent), "MINDRL_DATA_DIR": str(shared_data)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert main(["eval", "builtin:tiny", "--benchmarks", "gsm8k", "--limit", "2", "--n", "2",
                     "--max-new-tokens", "8", "--no-plot", "--output-dir", str(out)]) == 0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out


@pytest.fixture
def readme_env(tmp_path, monkeypatch, tiny_dir):
    # the data files: $MINDRL_DATA_DIR (conftest: ../shared/data); a command that needs one
    # this machine lacks is reported as skipped (conftest), the others run
    monkeypatch.setenv("MINDRL_CACHE", str(Path(tiny_dir).parent))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def _run(command: str, capsys):
    """(exit code, stdout, stderr) of one command line."""
    argv = shlex.split(command)
    if argv[0] == "mindrl" and argv[1:2] != ["launch"]:
        from mindrl.cli import main

        capsys.readouterr()
        try:
            rc = main(argv[1:])
        except SystemExit as e:          # argparse: --help, usage errors
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        out, err = capsys.readouterr()
        return rc, out, err
    if argv[0] == "mindrl":
        command = f"{shlex.quote(sys.executable)} -m {command}"
    # the docs assume the venv is active (`source .venv/bin/activate`): its bin/ first on PATH
    env = dict(os.environ, PYTHONPATH=str(REPO),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    res = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    return res.returncode, res.stdout, res.stderr


def _help_argv(text: str) -> str:
    words = text.split()[1:]
    sub = []
    for w in words[:2]:
        if not re.fullmatch(r"[a-z][a-z-]*", w):
            break
        sub.append(w)
    return "mindrl " + " ".join(sub) + " --help"


def _no_paths(line: str) -> str:
    return re.sub(r"\S*/\S*", "<path>", line)


# ------------------------------------------------------------------------------- commands
@pytest.mark.parametrize("cmd, form", _cases())
def test_readme_command_runs(cmd, form, request, capsys):
    where = f"{cmd.block.page} line {cmd.line} ({cmd.block.section})"
    if form is None:
        pytest.fail(
            f"{where}: `{cmd.text}` has no cheap form. Add this line to the "
            f"`<!-- readme-test` comment just above its block (line {cmd.block.line}; create the "
            f"comment if there is none), replacing `help` with a real cheap run where one "
            f"exists (`$ COMMAND` with {{small}}, {{run}}, {{ckpt}}, {{evalrun}}, {{files}}, "
            f"{{tmp}}; see tests/test_readme.py):\n    {doc.suggestion(cmd)}")
    if form.kind == "skip":
        pytest.skip(f"{where}: `{cmd.text}` not run: {form.arg}")
    if form.kind == "run":
        missing = doc.placeholders(cmd.text)
        assert not missing, (f"{where}: `{cmd.text}` has placeholders {missing}; its form must "
                             "be `$ COMMAND` with concrete values, not `run`")
        command = cmd.text
    elif form.kind == "help":
        assert cmd.text.startswith("mindrl "), f"{where}: `help` is only for mindrl commands"
        command = _help_argv(cmd.text)
    else:
        tmp = request.getfixturevalue("readme_env")
        subs = {"tmp": str(tmp)}
        for name, fixture in (("run", "tiny_run"), ("evalrun", "tiny_eval_run"),
                              ("files", "readme_files")):
            if "{" + name + "}" in form.arg:
                subs[name] = str(request.getfixturevalue(fixture))
        if "{ckpt}" in form.arg:
            subs["ckpt"] = str(Path(request.getfixturevalue("tiny_run")) / "checkpoints"
                               / "step_000002")
        subs["small"] = SMALL.format(tmp=tmp)
        command = form.arg.format(**subs)
    if form.kind != "cmd":
        request.getfixturevalue("readme_env")
    rc, out, err = _run(command, capsys)
    errors = cmd.expected and cmd.expected[0].startswith("mindrl: ")
    tail = (out[-1500:] + "\n" + err[-3000:]).strip()
    if not errors:
        assert rc == 0, f"{where}: `{command}` exited {rc}:\n{tail}"
        return
    assert rc == 2, f"{where}: `{command}` should fail as the page shows, exited {rc}:\n{tail}"
    got = err.strip().splitlines()[-1]
    if form.kind == "run":
        assert got == cmd.expected[0], \
            f"{where}: the page shows\n  {cmd.expected[0]}\nit prints\n  {got}"
    else:
        assert _no_paths(got) == _no_paths(cmd.expected[0]), \
            f"{where}: the page shows\n  {cmd.expected[0]}\nit prints\n  {got}"


def test_annotations_are_well_formed_and_all_used():
    problems = []
    for block in BLOCKS:
        if block.annotation is None:
            continue
        forms, bad = doc.parse_annotation(block.annotation)
        problems += [f"{block.page} line {block.annotation_line}: {b}" for b in bad]
        if block.lang == "yaml":
            continue
        cmds = doc.commands(block)
        for key in forms:
            if not any(c.text == key or c.text.startswith(key + " ") for c in cmds):
                problems.append(f"{block.page} line {block.annotation_line}: `{key} =>` matches "
                                f"no command of the block at line {block.line}; update it")
    problems += doc.unused_side_forms(REPO)
    assert not problems, "\n".join(problems)


def test_readme_shows_no_test_notes_and_its_forms_are_in_the_side_file():
    """README.md renders without readme-test comments; its blocks still have their forms."""
    assert "readme-test" not in README.read_text(encoding="utf-8")
    shell = [b for b in doc.read_blocks(README, "README.md") if b.lang == "bash"]
    assert shell and all(b.annotation for b in shell)
    assert all(b.annotation_line > 0 for b in shell)


@pytest.mark.parametrize("block", [pytest.param(b, id=f"{b.page}:L{b.line}") for b in BLOCKS
                                   if b.lang == "yaml"])
def test_readme_yaml_block_is_a_valid_config(block, tmp_path, capsys):
    forms, _ = doc.parse_annotation(block.annotation or "")
    if "yaml" in forms and forms["yaml"].kind == "skip":
        pytest.skip(f"{block.page} line {block.line}: not loaded: {forms['yaml'].arg}")
    from mindrl.cli import main

    path = tmp_path / "block.yaml"
    path.write_text(block.text + "\n")
    assert main(["config", "show", str(path)]) == 0, capsys.readouterr().err


# ---------------------------------------------------------------------- recipes and options
def _recipe_tables(text):
    """Backticked names in the first column of tables whose header's first cell is 'recipe'."""
    names, in_table = [], False
    for line in text.splitlines():
        if line.startswith("|"):
            first = line.split("|")[1].strip()
            if first == "recipe":
                in_table = True
            elif in_table and not set(first) <= set("-: "):
                names += re.findall(r"`([^`]+)`", first)
        else:
            in_table = False
    return names


def test_every_recipe_in_the_tables_resolves_and_every_recipe_is_listed():
    from mindrl.config.stages import load_stages

    names = _recipe_tables(_all_text())
    assert "grpo_tiny_demo" in names and len(names) >= 7, names
    for name in names:
        load_stages(name)                # raises ConfigError naming the problem (any stage)
    on_disk = sorted(p.stem for p in (REPO / "yaml_configs").glob("*.yaml"))
    unlisted = sorted(set(on_disk) - set(names))
    assert not unlisted, \
        f"recipes in yaml_configs/ missing from the recipe tables of the docs: {unlisted}"


NESTED = {"kl": "algorithm.kl", "dynamic_sampling": "algorithm.dynamic_sampling"}   # short forms
# other frameworks' own config keys that the docs quote (verl, on the Integrations page); they
# share a section name with ours but are not mindrl options
FOREIGN = ("reward.custom_reward_function.", "reward.reward_manager.")


def _named_options(text):
    """Dotted option names in a page outside transcripts (whose error examples misspell keys on
    purpose); ``kl.x`` is read as ``algorithm.kl.x``."""
    text = doc.ANNOTATION.sub("", text)
    for block in BLOCKS:
        if block.lang == "" and any(c.expected for c in doc.commands(block)):
            text = text.replace(block.text, "")
    found = set()
    heads = "|".join(SECTIONS + tuple(NESTED))
    pat = r"(?<![\w./-])((?:%s)\.[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)(\.\*)?" % heads
    for m in re.finditer(pat, text):
        name, star = m.group(1), bool(m.group(2))
        tail = text[m.end():m.end() + 1]
        if re.search(r"\.(parquet|jsonl|json|yaml|py|sh|png|md)$", name) or tail == "/":
            continue                     # a file name (train.parquet), not an option
        head = name.split(".")[0]
        found.add((NESTED[head] + name[len(head):] if head in NESTED else name, star))
    return found


def test_every_option_the_docs_name_exists():
    from mindrl.config.loader import describe

    keys = {k for k, *_ in describe()}
    prefixes = {k.rsplit(".", i)[0] for k in keys for i in range(1, k.count(".") + 1)}
    named, missing = set(), []
    for page in PAGES:
        here = _named_options(page.read_text(encoding="utf-8"))
        named |= here
        missing += [f"{page.relative_to(REPO)}: {n}" for n, _ in sorted(here)
                    if n not in keys and n not in prefixes and not n.startswith(FOREIGN)]
    assert ("train.lr", False) in named and ("algorithm.kl.value_clip", False) in named
    assert not missing, ("options named in the docs that `mindrl config show --keys` does "
                         f"not list: {missing}")


# ------------------------------------------------------------------------------- figures
def _figures():
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  REPO / "bench" / "readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_figures"] = module        # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_figure_is_found_once_in_the_docs():
    figs = _figures()
    text = figs.docs_text()
    bad = [f"{f.name}: {len(f.old(text))} matches of {f.pattern!r}" for f in figs.FIGURES
           if len(f.old(text)) != 1]
    assert not bad, ("bench/readme_figures.py patterns out of step with the docs:\n"
                     + "\n".join(bad))


def test_instant_figures_hold(tiny_dir, shared_data):   # row counts read ../shared/data
    figs = _figures()
    text = figs.docs_text()
    for f in figs.FIGURES:
        if f.instant:
            assert f.compute() == f.old(text)[0], f"{f.name}: docs {f.old(text)[0]}; now " \
                                                  f"{f.compute()} (command: {f.command})"


@pytest.mark.slow
def test_eval_example_table_is_what_its_command_prints(readme_env, capsys):
    """The example table of docs/evaluation.md is the whole output of its tiny eval command."""
    text = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    cmd = next(c for b in BLOCKS for c in doc.commands(b)
               if c.text.startswith("mindrl eval builtin:tiny --benchmarks math500"))
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("| benchmark | problems"))
    shown = []
    for ln in lines[head:]:
        if not ln.startswith("|"):
            break
        shown.append(ln)
    rc, out, err = _run(cmd.text, capsys)
    assert rc == 0, err[-2000:]
    printed = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert printed == shown, ("docs table:\n" + "\n".join(shown) + "\nprinted:\n"
                              + "\n".join(printed))


def test_overrides_after_an_option_are_overrides():
    """`mindrl launch RECIPE --run sft key=value`, as the README writes it, used to stop with
    'unrecognized arguments'."""
    from mindrl.cli import parse_argv

    args = parse_argv(["launch", "sft_tiny_demo", "--run", "sft", "train.steps=1", "train.lr=2"])
    assert (args.recipe, args.run, args.overrides) == ("sft_tiny_demo", "sft",
                                                       ["train.steps=1", "train.lr=2"])
    args = parse_argv(["launch", "sft_tiny_demo", "a.b=1", "--run", "dpo", "c.d=2"])
    assert (args.run, args.overrides) == ("dpo", ["a.b=1", "c.d=2"])
    with pytest.raises(SystemExit):
        parse_argv(["launch", "sft_tiny_demo", "--run", "sft", "--nope"])


def test_a_command_without_a_form_is_reported_with_the_line_to_add(tmp_path):
    """How a section merged later without annotations fails: with the exact line to add."""
    md = tmp_path / "R.md"
    md.write_text("# A\n\n<!-- readme-test\nmindrl config show --keys => run\n-->\n\n```bash\n"
                  "mindrl config show --keys   # all keys\nmindrl analyze RUN_DIR \\\n"
                  "    --top 3\nray start --head\n```\n\n# B\n\nprose\n```bash\nmindrl x y\n```\n")
    blocks = doc.read_blocks(md)
    assert [(b.line, b.annotation is not None) for b in blocks] == [(7, True), (17, False)]
    forms, problems = doc.parse_annotation(blocks[0].annotation)
    cmds = doc.commands(blocks[0])
    assert [(c.line, c.text) for c in cmds] == [(8, "mindrl config show --keys"),
                                                (9, "mindrl analyze RUN_DIR --top 3"),
                                                (11, "ray start --head")]
    assert [doc.form_for(c, forms) is not None for c in cmds] == [True, False, False]
    assert doc.suggestion(cmds[1]) == "mindrl analyze RUN_DIR --top 3 => help"
    assert doc.suggestion(cmds[2]) == "ray start --head => skip: REASON"
    assert doc.placeholders(cmds[1].text) == ["RUN_DIR"]
    assert not problems and doc.commands(blocks[1])[0].text == "mindrl x y"
