"""The sandbox starts the project's interpreter wherever it is installed, with bubblewrap AND with
the unshare fallback, and shows the snippet nothing else of that place.

Each location is built here, reaching the real venv's packages: a fresh venv under /tmp, the
real venv through a symlink under /tmp, a venv under a fake $HOME (mode 0700, like a home), a
venv on a path with spaces, a conda-style prefix (its own stdlib, ``sys.prefix ==
sys.base_prefix``) under /tmp, and a copy of the project itself under /tmp with a space in its
name. Each case runs a snippet that imports a module only that location has, then checks that a
secret next to the installation, one elsewhere under /tmp, one in $HOME and a hidden directory
inside the installation are out of sight.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path

import pytest

from mindrl.tools.sandbox import (Sandbox, SandboxLimits, available, mount_plan,
                                  resolve_isolation)

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(timeout_s=30.0, memory_mb=1024, output_bytes=8000)
# the package folders of the interpreter running this (a venv may reach another one's by .pth)
SITES = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")
         and os.path.isdir(p)]
VERSION = f"python{sys.version_info[0]}.{sys.version_info[1]}"
SNIPPET = """
import json, os, sys
import numpy
try:
    import probe_mod
    probe = probe_mod.X
except ImportError:
    probe = None
seen = {}
for p in PATHS:
    try:
        seen[p] = open(p).read() if os.path.isfile(p) else sorted(os.listdir(p))
    except OSError as e:
        seen[p] = e.errno
print(json.dumps({"prefix": sys.prefix, "base": sys.base_prefix, "probe": probe,
                  "numpy": numpy.ones(3).sum().item(), "seen": seen}))
"""


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def isolation(request):
    kind = request.param
    if available(kind):
        return kind
    fallback = resolve_isolation("auto")
    warnings.warn(f"isolation {kind} is not available on this machine: the location cases "
                  f"for {kind} ran with {fallback}", UserWarning)
    return fallback


def _own_site(python: Path) -> Path:
    out = subprocess.run([str(python), "-I", "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, timeout=60)
    return Path(out.stdout.strip())


def _fresh_venv(where: Path) -> Path:
    """A venv at ``where`` (no pip) that reaches this interpreter's packages through a .pth
    file and has a module of its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   timeout=120)
    python = where / "bin" / "python"
    site = _own_site(python)
    (site / "_reach_project_packages.pth").write_text("".join(p + "\n" for p in SITES))
    (site / "probe_mod.py").write_text("X = 'venv at ' + __file__\n")
    return python


def _linked_venv(where: Path) -> Path:
    """This interpreter's own installation, reached through a symlink at ``where`` (nothing is
    added to it: it is the project's venv)."""
    os.symlink(os.path.realpath(sys.prefix), where)
    return where / "bin" / os.path.basename(sys.executable)


def _conda_prefix(where: Path) -> Path:
    """A self-contained prefix (``sys.prefix == sys.base_prefix``) as conda makes one: its own
    interpreter binary and stdlib (hard links when the filesystem allows), its own
    site-packages."""
    base_exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    stdlib = sysconfig.get_paths()["stdlib"]
    (where / "bin").mkdir(parents=True)
    shutil.copy2(base_exe, where / "bin" / VERSION)
    skip = shutil.ignore_patterns("site-packages", "test", "__pycache__", "idlelib", "tkinter")
    try:
        shutil.copytree(stdlib, where / "lib" / VERSION, ignore=skip, copy_function=os.link)
    except (OSError, shutil.Error):
        shutil.rmtree(where / "lib" / VERSION, ignore_errors=True)
        shutil.copytree(stdlib, where / "lib" / VERSION, ignore=skip)
    site = where / "lib" / VERSION / "site-packages"
    site.mkdir()
    (site / "_reach_project_packages.pth").write_text("".join(p + "\n" for p in SITES))
    (site / "probe_mod.py").write_text("X = 'venv at ' + __file__\n")
    python = where / "bin" / VERSION
    assert _own_site(python) == site                     # a prefix of its own, not the base
    return python


def _prefix_of(python: Path) -> str:
    return subprocess.run([str(python), "-I", "-c", "import sys; print(sys.prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()


LOCATIONS = ["tmp", "tmp-symlink", "home", "spaces", "conda-prefix"]


@pytest.fixture(scope="module")
def elsewhere():
    """A secret under /tmp outside every location."""
    d = Path(tempfile.mkdtemp(prefix="mindrl-elsewhere-", dir="/tmp"))
    (d / "secret.txt").write_text("ELSEWHERE-SECRET\n")
    yield d / "secret.txt"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module", params=LOCATIONS)
def location(request):
    """(kind, the place, the interpreter in it, its sys.prefix, a hidden dir inside it)."""
    kind = request.param
    if kind == "home":              # a home outside /tmp, closed to other users like a home
        place = Path(tempfile.mkdtemp(prefix=".home-", dir=REPO))
        python = _fresh_venv(place / ".local" / "venvs" / "proj")
    else:
        place = Path(tempfile.mkdtemp(prefix="mindrl loc " if kind == "spaces" else "mindrl-loc-",
                                      dir="/tmp"))
        python = {"tmp": lambda: _fresh_venv(place / "venv"),
                  "tmp-symlink": lambda: _linked_venv(place / "venv"),
                  "spaces": lambda: _fresh_venv(place / "my venv"),
                  "conda-prefix": lambda: _conda_prefix(place / "conda env")}[kind]()
    (place / "secret.txt").write_text("NEXT-TO-THE-VENV-SECRET\n")
    prefix = _prefix_of(python)
    gold = Path(prefix) / "gold" if kind != "tmp-symlink" else place / "gold"
    gold.mkdir()
    (gold / "answers.txt").write_text("GOLD-SECRET\n")
    yield kind, place, python, prefix, gold
    shutil.rmtree(place, ignore_errors=True)


def test_the_snippet_runs_and_sees_only_the_installation(location, isolation, elsewhere,
                                                         monkeypatch):
    kind, place, python, prefix, gold = location
    home = place if kind == "home" else Path(tempfile.mkdtemp(prefix=".home-", dir=REPO))
    try:
        (home / ".ssh").mkdir(exist_ok=True)
        (home / ".ssh" / "id_rsa").write_text("HOME-SECRET\n")
        monkeypatch.setenv("HOME", str(home))
        sb = Sandbox(LIMITS, isolation=isolation, python=str(python), hide_paths=[str(gold)])
        paths = [str(place / "secret.txt"), str(place), str(elsewhere), str(gold),
                 str(gold / "answers.txt"), str(home / ".ssh" / "id_rsa"), str(home), "/tmp"]
        r = sb.run(SNIPPET.replace("PATHS", repr(paths)))
        assert r.verdict == "ok", r.output
        out = json.loads(r.stdout)
    finally:
        if kind != "home":
            shutil.rmtree(home, ignore_errors=True)
    # the interpreter of that location, with its own module and the project's packages
    assert out["prefix"] == prefix
    if kind == "tmp-symlink":
        assert out["probe"] is None
    else:
        assert out["probe"].startswith(f"venv at {prefix}/")
    assert out["numpy"] == 3.0
    if kind == "conda-prefix":
        assert out["base"] == out["prefix"]
    # nothing else of /tmp or the home: only the path down to the installation is there
    assert "SECRET" not in r.stdout
    seen = out["seen"]
    allowed = {"work", place.name}                      # work: the snippet's own directory
    # the runner's folder and this interpreter's installation are bound (a checkout or venv
    # that itself lives under /tmp, as in CI's copy, whose venv reaches the packages of the
    # checkout's venv through a .pth file): the path down to them shows, nothing beside it
    for p in [REPO, Path(sys.prefix), Path(sys.base_prefix)] + [Path(x) for x in sys.path if x]:
        for q in {p, p.resolve()}:
            if q.is_absolute() and q.is_relative_to("/tmp") and q != Path("/tmp"):
                allowed.add(q.relative_to("/tmp").parts[0])
    assert set(seen["/tmp"]) <= allowed, seen["/tmp"]
    if kind == "home":
        assert seen[str(place)] == [".local"]            # not .ssh, not secret.txt
    elif kind != "tmp-symlink":
        assert seen[str(place)] == [Path(prefix).name]   # the venv's folder alone
    else:
        assert seen[str(place)] == ["venv"]              # the symlink alone
    assert seen[str(gold)] == [] or isinstance(seen[str(gold)], int)
    for secret in (place / "secret.txt", elsewhere, gold / "answers.txt",
                   home / ".ssh" / "id_rsa"):
        assert isinstance(seen[str(secret)], int), (secret, seen[str(secret)])


def test_a_project_copied_under_tmp_with_a_space(isolation):
    # the whole project (the runner included) in a checkout under /tmp, started by a venv in
    # that checkout: its data and other files stay out of sight
    place = Path(tempfile.mkdtemp(prefix="mindrl ci ", dir="/tmp"))
    try:
        checkout = place / "check out"
        shutil.copytree(REPO / "mindrl", checkout / "mindrl",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (checkout / "data").mkdir()
        (checkout / "data" / "gold.jsonl").write_text('{"answer": "GOLD-SECRET"}\n')
        python = _fresh_venv(checkout / ".venv")
        code = f"""
import json, sys
from mindrl.tools.sandbox import RUNNER, Sandbox, SandboxLimits
assert RUNNER.startswith({str(checkout)!r}), RUNNER
sb = Sandbox(SandboxLimits(timeout_s=30), isolation={isolation!r}, python=sys.executable)
r = sb.run('''import os, probe_mod
print(sorted(os.listdir({str(checkout)!r})))
print(sorted(os.listdir({str(checkout / "mindrl")!r})))
try:
    print(open({str(checkout / "data" / "gold.jsonl")!r}).read())
except OSError as e:
    print("no data", e.errno)
''')
print(json.dumps([r.verdict, r.stdout, r.stderr]))
"""
        done = subprocess.run([str(python), "-c", code], cwd=str(checkout), capture_output=True,
                              text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(checkout)})
        assert done.returncode == 0, done.stderr
        verdict, stdout, stderr = json.loads(done.stdout.splitlines()[-1])
        assert verdict == "ok", stderr
        lines = stdout.splitlines()
        assert lines[0] == "['.venv', 'mindrl']"       # not data/
        assert lines[1] == "['tools']"                  # the runner's folder alone
        assert lines[2].startswith("no data") and "GOLD" not in stdout
    finally:
        shutil.rmtree(place, ignore_errors=True)


def test_mount_plan_binds_after_the_masks(tmp_path):
    # /tmp-like scratch holding a checkout that is bound again, with a run directory inside it
    # hidden again; a home (hidden) holding an interpreter; a hidden file; a symlink under the
    # scratch; paths that need nothing (under a bound path, under no mask, nested masks)
    t, h = tmp_path / "scratch", tmp_path / "home"
    for d in (t / "clone" / "runs", t / "clone" / "mindrl", h / "deep", h / "py" / "v1",
              tmp_path / "usr"):
        d.mkdir(parents=True)
    (tmp_path / "key.txt").write_text("k")
    s = str
    ops = mount_plan(scratch=[s(t)],
                     hide=[s(t / "clone" / "runs"), s(h), s(h / "deep"), s(tmp_path / "key.txt"),
                           s(tmp_path / "missing")],
                     expose=[s(t / "clone"), s(t / "clone" / "mindrl"), s(h / "py" / "v1"),
                             s(tmp_path / "usr")],
                     links={s(t / "lnk"): "clone"}, scratch_bytes=1024)
    assert ops == [
        ["tmpfs", s(h), 0o555, 65536],
        ["file", s(tmp_path / "key.txt")],
        ["tmpfs", s(t), 0o1777, 1024],
        ["bind", s(t / "clone")],
        ["symlink", "clone", s(t / "lnk")],
        ["dir", s(h / "py"), 0o755],
        ["bind", s(h / "py" / "v1")],
        ["tmpfs", s(t / "clone" / "runs"), 0o555, 65536],
        ["remount_ro", s(t / "clone" / "runs")],
        ["remount_ro", s(h)],
    ]
