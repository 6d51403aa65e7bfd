"""``mindrl data fetch NAME...``: the published benchmark and training files, from the Hugging
Face Hub into the data directory (:mod:`mindrl.data.location`).

Each name in :data:`PUBLISHED` is one file of a dataset repository on the Hub, downloaded with
``huggingface_hub.hf_hub_download`` (which honours ``HF_ENDPOINT`` for a mirror, ``HF_TOKEN``
and the Hub cache, and resumes a transfer cut off mid-file), then written as JSONL at the path
the loaders read (``eval/math500_test.simplerl.jsonl``, ...):

- the downloaded bytes are hashed (SHA-256) and must equal the Hub's own hash of the file (the
  ETag of a file stored with Git LFS / Xet is its SHA-256) and, where the entry pins one, the
  pinned value; a mismatch stops before anything is written;
- parquet files become JSONL rows with the same columns; ``rename`` maps a column to the name
  the loader reads (the Hub's AIME 2025 ``problem`` -> ``prompt``);
- ``DATA/fetched.json`` records, per name, the repository, the commit it came from, the source's
  SHA-256 and the written file's SHA-256 and row count. A file already there whose SHA-256
  matches that record is not downloaded again, so an interrupted ``fetch all`` resumes with
  what is missing (``--force`` downloads again).

The Hub copies are the sets' published releases; their rows match the files this project tests
with (``../shared/data/README.md``), but not always byte for byte (JSONL written from parquet).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from mindrl.data.io import DataError
from mindrl.data.location import data_root
from mindrl.registry import Registry

MANIFEST = "fetched.json"


@dataclass(frozen=True)
class Published:
    """One published file: where it is on the Hub and where the loaders read it."""

    name: str
    target: str                 # path inside the data directory
    repo_id: str                # a dataset repository on the Hub
    filename: str               # path inside that repository
    revision: str = "main"      # a branch, tag or commit
    rows: int = 0               # rows the published file holds (a mismatch warns)
    rename: Dict[str, str] = field(default_factory=dict)   # column -> name the loader reads
    sha256: str = ""            # of the downloaded file, when pinned
    what: str = ""


PUBLISHED: Registry = Registry("published data set")
for _p in (
    Published("math500", "eval/math500_test.simplerl.jsonl", "HuggingFaceH4/MATH-500",
              "test.jsonl", "ff5b20257d8185524591543f8ff5993951537bb8", 500,
              what="MATH-500 (the PRM800K test split)"),
    Published("aime24", "eval/aime24_test.simplerl.jsonl", "HuggingFaceH4/aime_2024",
              "data/train-00000-of-00001.parquet", rows=30, what="AIME 2024"),
    Published("aime25", "eval/aime25.qwq.jsonl", "math-ai/aime25", "test.jsonl", rows=30,
              rename={"problem": "prompt"}, what="AIME 2025"),
    Published("amc23", "eval/amc23_test.simplerl.jsonl", "math-ai/amc23",
              "test-00000-of-00001.parquet", rows=40, what="AMC 2023"),
    Published("gsm8k", "eval/gsm8k_test.openai.jsonl", "openai/gsm8k",
              "main/test-00000-of-00001.parquet", rows=1319, what="GSM8K test"),
    Published("gsm8k_train", "train/gsm8k_train.openai.jsonl", "openai/gsm8k",
              "main/train-00000-of-00001.parquet", rows=7473, what="GSM8K train"),
    Published("math_l3to5", "train/simplelr_qwen_level3to5_train.simplerl_pr57.jsonl",
              "hkust-nlp/SimpleRL-Zoo-Data", "simplelr_qwen_level3to5/train.parquet",
              rows=8523, what="MATH levels 3-5 (SimpleRL)"),
):
    PUBLISHED.register(_p.name, _p)


class FetchError(DataError):
    """A download that could not be made or verified (one line, naming the set)."""


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def expand_names(names: Sequence[str]) -> List[str]:
    """``all`` -> every name; unknown names stop with the valid ones listed."""
    out: List[str] = []
    for n in names:
        for part in (x.strip() for x in n.split(",")):
            if not part:
                continue
            if part == "all":
                out.extend(PUBLISHED.names())
            elif part in PUBLISHED:
                out.append(part)
            else:
                raise FetchError(f"unknown data set '{part}'; valid names: "
                                 f"{', '.join(PUBLISHED.names())}, all")
    return list(dict.fromkeys(out))


def _read_manifest(root: Path) -> Dict[str, dict]:
    try:
        return json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def _write_manifest(root: Path, manifest: Dict[str, dict]) -> None:
    tmp = root / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, root / MANIFEST)


def _to_jsonl(src: Path, dst: Path, rename: Dict[str, str]) -> int:
    """Write ``src`` (parquet or JSONL) as JSONL rows, columns renamed; returns the rows."""
    if src.suffix == ".parquet":
        import pyarrow.parquet as pq  # noqa: PLC0415

        rows = pq.read_table(src).to_pylist()
    elif not rename:
        shutil.copyfile(src, dst)
        with open(dst, "rb") as f:
            return sum(1 for line in f if line.strip())
    else:
        with open(src, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    with open(dst, "w", encoding="utf-8") as f:
        for r in rows:
            r = {rename.get(k, k): v for k, v in r.items()}
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)


def _hub_sha256(etag: Optional[str]) -> Optional[str]:
    """The SHA-256 an ETag carries (files in LFS / Xet storage), else None (a git blob's ETag
    is its git SHA-1)."""
    etag = (etag or "").strip('"').lower()
    return etag if re.fullmatch(r"[0-9a-f]{64}", etag) else None


def fetch_one(p: Published, root: Path, force: bool = False, log=print) -> dict:
    """Download, verify and write one published file; returns its manifest record."""
    from huggingface_hub import hf_hub_download, hf_hub_url  # noqa: PLC0415
    from huggingface_hub import constants as hf_constants  # noqa: PLC0415
    from huggingface_hub import get_hf_file_metadata  # noqa: PLC0415

    target = root / p.target
    manifest = _read_manifest(root)
    rec = manifest.get(p.name)
    if (not force and rec and target.is_file() and rec.get("sha256")
            and sha256_file(target) == rec["sha256"]):
        log(f"{p.name}: already in {target} ({rec['rows']} rows, from {p.repo_id}@"
            f"{rec['commit'][:7]})")
        return rec
    if hf_constants.HF_HUB_OFFLINE:
        raise FetchError(f"{p.name}: HF_HUB_OFFLINE is set, so nothing can be downloaded "
                         f"(unset it, or copy the file to {target})")
    endpoint = os.environ.get("HF_ENDPOINT") or None
    t0 = time.perf_counter()
    try:
        url = hf_hub_url(p.repo_id, p.filename, repo_type="dataset", revision=p.revision,
                         endpoint=endpoint)
        meta = get_hf_file_metadata(url, endpoint=endpoint)
        src = Path(hf_hub_download(p.repo_id, p.filename, repo_type="dataset",
                                   revision=meta.commit_hash or p.revision,
                                   endpoint=endpoint))
    except Exception as e:  # noqa: BLE001  (network, HTTP and Hub errors: one line)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FetchError(f"{p.name}: could not download {p.filename} from {p.repo_id} "
                         f"({endpoint or hf_constants.ENDPOINT}): {first}") from None
    got = sha256_file(src)
    for expected, whose in ((_hub_sha256(meta.etag), "the Hub's"), (p.sha256, "the pinned")):
        if expected and got != expected:
            raise FetchError(f"{p.name}: {p.filename} from {p.repo_id} has SHA-256 {got}, "
                             f"{whose} is {expected}: not written (delete the Hub cache entry "
                             f"{src} and fetch again)")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        n = _to_jsonl(src, Path(tmp), p.rename)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    rec = {"repo": p.repo_id, "file": p.filename, "commit": meta.commit_hash or p.revision,
           "source_sha256": got, "target": p.target, "sha256": sha256_file(target), "rows": n}
    manifest = _read_manifest(root)
    manifest[p.name] = rec
    _write_manifest(root, manifest)
    note = f"; the published set has {p.rows}" if p.rows and n != p.rows else ""
    log(f"{p.name}: {p.repo_id}@{rec['commit'][:7]} {p.filename} -> {target} ({n} rows, "
        f"sha256 {rec['sha256'][:12]}, {time.perf_counter() - t0:.1f} s{note})")
    return rec


def fetch(names: Sequence[str], data_dir=None, force: bool = False, log=print) -> Path:
    """Fetch each name (``all`` = every one) into the data directory; returns the directory."""
    todo = expand_names(names)
    if not todo:
        raise FetchError(f"name a data set: {', '.join(PUBLISHED.names())}, all")
    root = data_root(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    for n in todo:
        fetch_one(PUBLISHED.get(n), root, force=force, log=log)
    return root


def add_fetch_parser(sub) -> None:
    """``mindrl data fetch`` on the ``mindrl data`` subparsers."""
    from mindrl.command import DefaultsHelpFormatter as fmt  # noqa: PLC0415

    names = ", ".join(PUBLISHED.names())
    fp = sub.add_parser("fetch", formatter_class=fmt,
                        help="download the published benchmark and training files from the "
                             "Hugging Face Hub into the data directory (HF_ENDPOINT: a mirror)")
    fp.add_argument("names", metavar="NAME", nargs="+", help=f"{names}, or all")
    fp.add_argument("--data-dir", default=None, help="where to write (default: "
                    "$MINDRL_DATA_DIR, else ~/.cache/mindrl/data)")
    fp.add_argument("--force", action="store_true",
                    help="download again even when the file is there and verified")
    fp.set_defaults(func=fetch_command)


def fetch_command(args) -> int:
    import sys  # noqa: PLC0415

    try:
        root = fetch(args.names, args.data_dir, force=args.force)
    except DataError as e:
        print(f"mindrl data fetch: error: {e}", file=sys.stderr)
        return 2
    print(f"data fetch: done; the files are in {root}")
    return 0
