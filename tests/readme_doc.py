"""README.md and every page under docs/ read as a test plan: their fenced blocks, the commands in
them, and the cheap form of each command declared in an HTML comment just above the block.

An annotation is an HTML comment that opens with ``readme-test`` and sits above a fenced block
(blank lines between are fine). Each further line is ``KEY => FORM``: KEY is the start of a
command of that block (as written, comments and line continuations removed, spaces collapsed);
the longest KEY that starts a command wins. FORM is one of

- ``run``: the command as written;
- ``help``: ``mindrl SUBCOMMAND --help`` (only when nothing cheaper can run);
- ``$ COMMAND``: this command instead, with ``{small}``, ``{run}``, ``{ckpt}``, ``{evalrun}``,
  ``{files}``, ``{tmp}`` substituted (see tests/test_readme.py);
- ``skip: REASON``: not run; the reason is printed by the test.

``slow`` before a form (``slow run``, ``slow $ ...``) marks that command's test slow. ``mindrl``
commands run in process, others with bash from the checkout root. A block may also be a
transcript (no language; lines ``$ COMMAND`` followed by what it prints): its commands are
checked the same way, and a ``run`` form must print the README's next line exactly.

README.md carries no such comments (they would show on the rendered page): the forms of its
blocks are in ``tests/readme_forms.txt`` (:data:`SIDE_FORMS`), where a line ``== COMMAND`` opens
the forms of the README block whose first command starts with COMMAND.

Every command of a shell block or transcript needs a form: a command without one fails the
test with the line to add. YAML blocks need none: each is loaded with ``mindrl config show``
unless an annotation gives ``yaml => skip: REASON``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

SHELL_LANGS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(`{3,})\s*([\w-]*)\s*$")
ANNOTATION = re.compile(r"<!--\s*readme-test\b(.*?)-->", re.S)


@dataclass
class Block:
    lang: str                     # "bash", "yaml", "" (a transcript or plain output) ...
    line: int                     # 1-based line of the opening fence
    text: str
    section: str                  # the heading above it
    annotation: Optional[str] = None   # the readme-test comment's body, if any
    annotation_line: int = 0
    page: str = "README.md"       # the file, relative to the checkout root


@dataclass
class Command:
    block: Block
    line: int                     # 1-based line of its page where the command starts
    text: str                     # comments, continuations and repeated spaces removed
    expected: List[str] = field(default_factory=list)   # transcript: the lines it prints


@dataclass
class Form:
    kind: str                     # run | help | cmd | skip
    arg: str = ""                 # the command (cmd) or the reason (skip)
    slow: bool = False
    key: str = ""


def doc_pages(repo: Path) -> List[Path]:
    """README.md, then every markdown page under docs/ (sorted): the files read as test plans."""
    return [Path(repo) / "README.md"] + sorted((Path(repo) / "docs").rglob("*.md"))


SIDE_FORMS = {"README.md": Path(__file__).resolve().parent / "readme_forms.txt"}


def side_forms(page: str) -> List[Tuple[str, str, int]]:
    """``(first command, annotation body, line)`` of each ``== COMMAND`` entry of ``page``'s
    side file (empty when it has none)."""
    path = SIDE_FORMS.get(page)
    if path is None or not path.is_file():
        return []
    out: List[Tuple[str, str, int]] = []
    for k, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.startswith("== "):
            out.append((" ".join(raw[3:].split()), "", k))
        elif out and not raw.startswith("#"):
            out[-1] = (out[-1][0], out[-1][1] + raw + "\n", out[-1][2])
    return out


def unused_side_forms(repo: Path) -> List[str]:
    """Side-file entries that open no block of their page (a README block changed)."""
    problems = []
    for page, path in SIDE_FORMS.items():
        firsts = [commands(b)[0].text for b in read_blocks(Path(repo) / page, page)
                  if commands(b)]
        for first, _, line in side_forms(page):
            if not any(f == first or f.startswith(first + " ") for f in firsts):
                problems.append(f"{path.name} line {line}: `== {first}` opens no block of "
                                f"{page}; update it")
    return problems


def read_blocks(path: Path, page: str = "") -> List[Block]:
    blocks = _read_blocks(path, page or Path(path).name)
    for first, body, line in side_forms(page or Path(path).name):
        for b in blocks:
            cmds = commands(b)
            if b.annotation is None and cmds and (cmds[0].text == first
                                                  or cmds[0].text.startswith(first + " ")):
                b.annotation, b.annotation_line = body, line
                break
    return blocks


def _read_blocks(path: Path, page: str) -> List[Block]:
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    by_end = {}                                  # last line of an annotation -> (body, first line)
    for m in ANNOTATION.finditer(text):
        by_end[text.count("\n", 0, m.end()) + 1] = (m.group(1), text.count("\n", 0, m.start()) + 1)
    blocks: List[Block] = []
    section, i = "", 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].startswith("#"):
                section = lines[i].lstrip("#").strip()
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        block = Block(lang, i + 1, "\n".join(lines[i + 1:j]), section, page=page)
        k = i                                    # the annotation: just above, blank lines between
        while k >= 1 and not lines[k - 1].strip():
            k -= 1
        if k in by_end:
            block.annotation, block.annotation_line = by_end[k][0], by_end[k][1]
        blocks.append(block)
        i = j + 1
    return blocks


def _strip_comment(line: str) -> str:
    """Drop a shell comment (``# ...`` after a space, outside quotes)."""
    quote = ""
    for k, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].strip()
    return line.strip()


def commands(block: Block) -> List[Command]:
    """The commands of a shell block (continuation lines joined) or of a transcript."""
    out: List[Command] = []
    rows = block.text.splitlines()
    if block.lang in SHELL_LANGS:
        buf, start = "", 0
        for k, raw in enumerate(rows):
            if not buf:
                start = block.line + 1 + k
            buf += raw.rstrip()
            if buf.endswith("\\"):
                buf = buf[:-1] + " "
                continue
            text = " ".join(_strip_comment(buf).split())
            if text:
                out.append(Command(block, start, text))
            buf = ""
        return out
    if block.lang == "":
        for k, raw in enumerate(rows):
            if raw.startswith("$ "):
                cmd = Command(block, block.line + 1 + k, " ".join(_strip_comment(raw[2:]).split()))
                for nxt in rows[k + 1:]:
                    if nxt.startswith("$ "):
                        break
                    cmd.expected.append(nxt)
                out.append(cmd)
    return out


def parse_annotation(body: str) -> Tuple[Dict[str, Form], List[str]]:
    """KEY => FORM lines -> {key: Form}; also the problems found (bad lines)."""
    forms: Dict[str, Form] = {}
    problems: List[str] = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith("(") or "=>" not in line:
            continue
        key, _, spec = line.partition("=>")
        key, spec = " ".join(key.split()), spec.strip()
        slow = spec.startswith("slow ")
        if slow:
            spec = spec[5:].strip()
        if spec == "run":
            form = Form("run")
        elif spec == "help":
            form = Form("help")
        elif spec.startswith("$ "):
            form = Form("cmd", spec[2:].strip())
        elif spec.startswith("skip:") and spec[5:].strip():
            form = Form("skip", spec[5:].strip())
        else:
            problems.append(f"'{line}': the form must be run, help, $ COMMAND or skip: REASON")
            continue
        form.slow, form.key = slow, key
        forms[key] = form
    return forms, problems


def form_for(cmd: Command, forms: Dict[str, Form]) -> Optional[Form]:
    keys = [k for k in forms if cmd.text == k or cmd.text.startswith(k + " ")]
    return forms[max(keys, key=len)] if keys else None


def suggestion(cmd: Command) -> str:
    """The annotation line to add for a command that has none."""
    if cmd.text.startswith("mindrl "):
        return f"{cmd.text} => help"
    return f"{cmd.text} => skip: REASON"


def placeholders(text: str) -> List[str]:
    """Words a user must replace: RECIPE, CKPT_DIR, RUN_DIR, [optional parts], '...'."""
    found = re.findall(r"\b[A-Z][A-Z_]{2,}\b(?!=)", text)
    found = [w for w in found if w not in {"NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"}]
    if "..." in text:
        found.append("...")
    if re.search(r"\s\[[^\]]*\]", text):
        found.append("[...]")
    return found
