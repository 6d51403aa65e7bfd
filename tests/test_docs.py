"""The documentation site: `mkdocs build --strict` passes (a broken link, a missing page, an
unknown anchor or a nav entry without its file fails it), the API pages list every registered
name, and no page tells the project's history instead of describing the product.

The commands on each page are run by tests/test_readme.py (README.md and docs/**/*.md alike).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))

# Development-history language: user docs describe the product as it is. Each pattern with the
# reason it is not product documentation.
HISTORY = [
    (r"\bissues? #?\d+", "an issue number"),
    (r"(?<![-\w])sessions?\b", "a development session"),      # not bwrap's --new-session
    (r"\bby hand\b", "a figure measured without a command"),
    (r"\bno script\b|\bscripts? (?:was |were )?not kept\b|\bthrow-away script", "a figure without its command"),
    (r"\bhistory\b|\bdiary\b", "project history"),
    (r"\b(?:first|earlier|previous|old) version\b|\bbefore the rework\b|\bthe rework\b", "an earlier version"),
    (r"\bcommit [0-9a-f]{7,40}\b", "a commit of this repository"),
    (r"\bhonest status\b", "narrative"),
    (r"\bPLATFORM\.md\b|\bDESIGN\.md\b|\bSTYLE\.md\b", "an internal note"),
]


def _mkdocs_available() -> bool:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError:
        return False
    return True


def test_docs_site_builds_in_strict_mode(tmp_path):
    """`mkdocs build --strict` into a temporary directory; warnings (broken links, anchors,
    missing pages, docstrings mkdocstrings cannot render) fail it."""
    assert _mkdocs_available(), ("mkdocs, mkdocs-material and mkdocstrings[python] are needed: "
                                 "pip install -e '.[docs]' (launch/setup_env.sh installs them)")
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_MKDOCS_2_WARNING="1")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(tmp_path / "site")], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    for page in ("index", "quickstart", "benchmarks", "api/index", "api/algorithms"):
        assert (tmp_path / "site" / page / "index.html").is_file() or \
            (tmp_path / "site" / f"{page}.html").is_file() or \
            (page == "index" and (tmp_path / "site" / "index.html").is_file()), page
    # the registry tables were filled from the code: every registered name is on the page
    from algorithms.advantages import ADV_ESTIMATORS
    from rewards.registry import REWARDS, load_builtin_rewards

    load_builtin_rewards()
    html = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "<!-- registry:" not in html
    for name in list(ADV_ESTIMATORS.names()) + list(REWARDS.names()):
        assert f"<code>{name}</code>" in html, f"{name} missing from the API registry page"


def test_every_docs_page_is_in_the_nav():
    import yaml

    cfg = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8").replace("!!", ""))

    def files(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for x in node:
                yield from files(x)
        elif isinstance(node, dict):
            for x in node.values():
                yield from files(x)

    in_nav = set(files(cfg["nav"]))
    on_disk = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert on_disk - in_nav == set(), f"pages not in mkdocs.yml's nav: {sorted(on_disk - in_nav)}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_no_development_history_in_the_docs(page):
    found = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for pattern, why in HISTORY:
            for m in re.finditer(pattern, line, re.I):
                found.append(f"{page.relative_to(REPO)}:{n}: '{m.group(0)}' ({why})")
    assert not found, "user docs describe the product, not its history:\n" + "\n".join(found)


def test_history_check_catches_what_it_should():
    bad = ["rerun for issue 20", "measured by hand", "in a session that gave", "no script kept",
           "the first version of this demo", "see ../shared/DESIGN.md", "commit ca403c9"]
    good = ["RUN_DIR/config_history/NNN_stepS.yaml", "the issue tracker", "a fresh venv",
            "`--die-with-parent`, `--new-session`"]
    hits = lambda s: any(re.search(p, s, re.I) for p, _ in HISTORY)   # noqa: E731
    assert all(hits(s) for s in bad) and not any(hits(s) for s in good)


def test_the_built_site_is_ignored_by_git():
    """`mkdocs build` writes site_dir (mkdocs.yml); git must not offer it for a commit."""
    import yaml

    site = yaml.safe_load((REPO / "mkdocs.yml").read_text())["site_dir"]
    res = subprocess.run(["git", "check-ignore", "-q", f"{site}/index.html"], cwd=REPO)
    assert res.returncode == 0, f"{site}/ is not in .gitignore"
