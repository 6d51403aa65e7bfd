"""Settings of an evaluation run, their validation and the hash that keys resumable samples."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from mindrl.data.benchmarks import split_benchmarks  # noqa: F401  (re-exported)
from mindrl.errors import UserError

DEFAULT_BENCHMARKS = ["math500", "aime24", "aime25", "amc23", "gsm8k"]
ENGINE_NAMES = ("native", "vllm")
BACKEND_NAMES = ("torch", "mindspore")

# The settings that change what is generated: they form the settings hash. Problem limits,
# worker counts, batch sizes, output places and grading rules do not (samples are reused
# across them; grading rules are stored per sample and re-applied when they change).
GENERATION_KEYS = ("model", "model_fingerprint", "template", "system_prompt", "n", "temperature",
                   "top_p", "top_k", "max_new_tokens", "seed", "engine", "backend", "dtype")


class EvalError(UserError, RuntimeError):
    """An evaluation run cannot proceed (bad input, a lost shard, a sample-count mismatch)."""


@dataclass
class EvalSettings:
    """Everything ``mindrl eval`` takes; the CLI and YAML (``--config``) fill these fields."""

    model: str = field(default="builtin:tiny",
        metadata={"help": "Model directory or builtin:tiny."})
    benchmarks: List[str] = field(default_factory=lambda: list(DEFAULT_BENCHMARKS), metadata={
        "help": "Built-in names, .jsonl/.json/.parquet paths, or hf:owner/name[:config][@split]."})
    n: int = field(default=1, metadata={"help": "Samples per problem (64 is common on AIME)."})
    temperature: float = field(default=0.6, metadata={"help": "0 = greedy."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling mass."})
    top_k: int = field(default=-1, metadata={"help": "Top-k (-1 = off)."})
    min_p: float = field(default=0.0, metadata={
        "help": "Min-p: drop tokens less likely than min_p times the most likely one (0 = off)."})
    max_new_tokens: int = field(default=4096, metadata={"help": "Response token limit."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})
    template: Optional[str] = field(default=None, metadata={
        "help": "Chat template; default: the one recorded in the checkpoint's mindrl_meta.json, "
                "else 'model' (the tokenizer's), else 'none'."})
    system_prompt: Optional[str] = field(default=None, metadata={
        "help": "System prompt; default: the checkpoint's recorded one, else the template's."})
    engine: str = field(default="native", metadata={"help": "native | vllm."})
    backend: str = field(default="torch", metadata={"help": "torch | mindspore (native engine)."})
    dtype: str = field(default="auto", metadata={
        "help": "Inference dtype: auto (on an accelerator the model's own dtype from its "
                "config.json, on CPU float32), float32, bfloat16, float16."})
    device: str = field(default="auto", metadata={
        "help": "auto (the accelerator present: cuda, then ascend, else cpu) | cpu | cuda | "
                "ascend."})
    tensor_parallel_size: int = field(default=1, metadata={
        "help": "vLLM: devices one engine spans (tensor parallel; vllm-ascend on NPU), for "
                "models larger than one device."})
    data_dir: Optional[str] = field(default=None, metadata={
        "help": "Directory with the benchmark files (default: $MINDRL_DATA_DIR, else the "
                "user cache that `mindrl data fetch` fills)."})
    problem_field: Optional[str] = field(default=None,
        metadata={"help": "Local/HF files: problem field."})
    answer_field: Optional[str] = field(default=None,
        metadata={"help": "Local/HF files: answer field."})
    id_field: Optional[str] = field(default=None, metadata={"help": "Local/HF files: id field."})
    limit: int = field(default=0, metadata={"help": "First N problems per benchmark (0 = all)."})
    output_dir: Optional[str] = field(default=None, metadata={
        "help": "Run directory (default runs/eval/<model>_<benchmarks>, the settings hash "
                "appended when that name is taken by other settings)."})
    workers: int = field(default=1,
        metadata={"help": "Ray data-parallel workers (1 = in-process)."})
    ray_address: str = field(default="", metadata={
        "help": "Ray for workers > 1: '' starts one on this machine; 'auto' or host:port joins "
                "a cluster (workers spread over its nodes)."})
    ray_resource: str = field(default="", metadata={
        "help": "Accelerator resource each Ray worker takes one of (GPU, NPU; '' = CPU only)."})
    max_restarts: int = field(default=2,
        metadata={"help": "Restarts per Ray worker before a shard is lost."})
    batch_size: int = field(default=32, metadata={"help": "Prompts per engine.generate call."})
    extract_mode: str = field(default="auto", metadata={"help": "Answer extraction mode."})
    last_number_fallback: bool = field(default=True, metadata={
        "help": "When an output marks no answer (boxed, tags, 'the answer is'), take its last "
                "LaTeX expression or number, as math-verify and lighteval do."})
    grade_timeout: float = field(default=5.0, metadata={"help": "Seconds per symbolic check."})
    approx_rel_tol: Optional[float] = field(default=None, metadata={
        "help": "Accept a decimal within this relative tolerance of a gold answer whose decimal "
                "never ends (1.299 for 3\\sqrt{3}/4 at 1e-3); off: such decimals are wrong."})
    grade_workers: int = field(default=2,
        metadata={"help": "Scoring processes of the rewards pool (0 = in-process)."})
    plot: bool = field(default=True, metadata={"help": "Write lengths.png."})
    cache_dir: Optional[str] = field(default=None,
        metadata={"help": "Where builtin models are built."})
    tools: str = field(default="", metadata={
        "help": "Tool-integrated evaluation: tools the model may call, comma-separated "
                "(python, or pkg.mod:function); '' = off."})
    tool_format: str = field(default="tir", metadata={
        "help": "Tool call format: tir (```python / ```output) or chat (<tool_call> JSON)."})
    max_turns: int = field(default=4, metadata={
        "help": "With tools: model turns per sample (max_new_tokens bounds all of them)."})
    tool_timeout: float = field(default=10.0, metadata={
        "help": "With tools: wall seconds per python call in the sandbox."})

    @classmethod
    def from_dict(cls, d: Dict[str, Any], where: str = "settings") -> "EvalSettings":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise EvalError(f"{where}: unknown eval option(s) {', '.join(unknown)}; valid: "
                            f"{', '.join(sorted(names))}")
        d = dict(d)
        if isinstance(d.get("benchmarks"), str):
            d["benchmarks"] = split_benchmarks(d["benchmarks"])
        return cls(**d)

    def check(self) -> None:
        errors = []
        if not self.benchmarks:
            errors.append("benchmarks is empty")
        if self.n < 1:
            errors.append(f"n={self.n} must be >= 1")
        if self.temperature < 0:
            errors.append(f"temperature={self.temperature} must be >= 0")
        if not 0 < self.top_p <= 1:
            errors.append(f"top_p={self.top_p} must be in (0, 1]")
        if not 0 <= self.min_p < 1:
            errors.append(f"min_p={self.min_p} must be in [0, 1)")
        if self.top_k == 0 or self.top_k < -1:
            errors.append(f"top_k={self.top_k} must be -1 (off) or >= 1")
        if self.max_new_tokens < 1:
            errors.append(f"max_new_tokens={self.max_new_tokens} must be >= 1")
        if self.engine not in ENGINE_NAMES:
            errors.append(f"engine '{self.engine}' unknown; valid: {', '.join(ENGINE_NAMES)}")
        if self.backend not in BACKEND_NAMES:
            errors.append(f"backend '{self.backend}' unknown; valid: {', '.join(BACKEND_NAMES)}")
        if self.device not in ("auto", "cpu", "cuda", "ascend"):
            errors.append(f"device '{self.device}' unknown; valid: auto, cpu, cuda, ascend")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            errors.append(f"dtype '{self.dtype}' unknown; valid: auto, float32, bfloat16, "
                          "float16")
        if self.tensor_parallel_size < 1:
            errors.append(f"tensor_parallel_size={self.tensor_parallel_size} must be >= 1")
        elif self.tensor_parallel_size > 1 and self.engine != "vllm":
            errors.append(f"tensor_parallel_size={self.tensor_parallel_size} needs engine "
                          f"vllm (got {self.engine})")
        elif self.tensor_parallel_size > 1 and self.workers > 1:
            errors.append(f"tensor_parallel_size={self.tensor_parallel_size} with workers="
                          f"{self.workers}: one tensor-parallel engine per run (workers 1)")
        if self.limit < 0:
            errors.append(f"limit={self.limit} must be >= 0")
        if self.workers < 1:
            errors.append(f"workers={self.workers} must be >= 1")
        if self.batch_size < 1:
            errors.append(f"batch_size={self.batch_size} must be >= 1")
        if self.grade_timeout <= 0:
            errors.append(f"grade_timeout={self.grade_timeout} must be > 0")
        if self.approx_rel_tol is not None and not 0 < self.approx_rel_tol < 1:
            errors.append(f"approx_rel_tol={self.approx_rel_tol} must be in (0, 1)")
        if self.tool_format not in ("tir", "chat"):
            errors.append(f"tool_format '{self.tool_format}' unknown; valid: tir, chat")
        if self.max_turns < 1:
            errors.append(f"max_turns={self.max_turns} must be >= 1")
        if errors:
            raise EvalError("invalid eval settings:\n  - " + "\n  - ".join(errors))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def model_fingerprint(model_dir: str) -> str:
    """Names, sizes and modification times of the weight and config files: a retrained
    checkpoint written to the same directory gets a new settings hash."""
    p = Path(model_dir)
    parts = []
    for f in sorted(p.iterdir()):
        if f.suffix in (".safetensors", ".bin", ".json", ".ckpt") and f.is_file():
            st = f.stat()
            parts.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def settings_hash(gen: Dict[str, Any]) -> str:
    """12 hex digits of SHA-256 over the generation settings (:data:`GENERATION_KEYS`, plus
    ``tools`` when tools are on and ``min_p`` when above 0, so runs without them keep their
    hashes)."""
    missing = [k for k in GENERATION_KEYS if k not in gen]
    if missing:
        raise ValueError(f"generation settings lack {missing}")
    keys = GENERATION_KEYS + (("tools",) if gen.get("tools") else ()) \
        + (("min_p",) if gen.get("min_p") else ())
    blob = json.dumps({k: gen[k] for k in keys}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
