"""Where does training move the policy? Position-wise low quantiles of log-probs under a fixed
policy.

For a set of responses y (token ids y_1..y_L after a prompt x) and a fixed scoring policy
pi_ref, the curve at response position t is

    Q_q(t) = q-quantile over responses with L > t of  log pi_ref(y_t | x, y_<t)

(NumPy's default linear interpolation; positions reached by fewer than ``min_count`` responses
are left out). Two uses, after the seed log:

- RL: the rollouts a run saved at several steps, each scored under the *initial* policy. A
  curve that drops at late positions first says the RL policy samples tokens the initial policy
  finds unlikely late in the response, i.e. RL changes late tokens first.
- SFT: the responses of a data file scored under checkpoints taken before and after SFT (one
  curve per checkpoint); there the early positions move first.

Scoring goes through a training backend's ``logprobs`` (torch by default), so the numbers are
the ones the trainer computes. Before any model loads, the token ids are checked against the
scoring model's vocabulary, and the prompts are re-encoded with its tokenizer: another
vocabulary is an error naming the model.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mindrl.analyze.rollouts import AnalyzeError, load_steps


# --------------------------------------------------------------------------- the statistic
def position_quantiles(logps: Sequence[np.ndarray], q: float, min_count: int = 1
                       ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, Q_q per position, responses per position) over ragged per-response log-probs.
    Positions are 0-based response token indices with at least ``min_count`` responses."""
    if not 0.0 <= q <= 1.0:
        raise AnalyzeError(f"quantile q={q} must lie in [0, 1]")
    lengths = [len(x) for x in logps]
    T = max(lengths, default=0)
    if T == 0:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    mat = np.full((len(logps), T), np.nan)                      # (B, T), NaN past each end
    for i, x in enumerate(logps):
        mat[i, :len(x)] = x
    counts = np.sum(~np.isnan(mat), axis=0)
    keep = np.flatnonzero(counts >= max(1, min_count))
    vals = np.nanquantile(mat[:, keep], q, axis=0) if keep.size else np.zeros(0)
    return keep, vals, counts[keep]


@dataclass
class Curve:
    label: str                   # "step 10" or a checkpoint name
    value: float                 # the step (RL) or the checkpoint's order (SFT), for colour
    positions: np.ndarray        # (K,) response positions kept
    quantiles: np.ndarray        # (K,) Q_q at those positions
    counts: np.ndarray           # (K,) responses reaching each position
    responses: int
    mean_length: float

    def thirds(self) -> List[Optional[float]]:
        """Mean of Q_q over the first, middle and last third of the positions kept."""
        parts = np.array_split(self.quantiles, 3) if self.quantiles.size >= 3 else []
        return [float(p.mean()) if p.size else None for p in parts] or [None, None, None]

    def to_json(self) -> Dict:
        return {"label": self.label, "value": self.value, "responses": self.responses,
                "mean_length": self.mean_length, "positions": self.positions.tolist(),
                "quantiles": [round(float(x), 6) for x in self.quantiles],
                "counts": self.counts.tolist()}


@dataclass
class QuantileResult:
    kind: str                    # "rl" or "sft"
    q: float
    scorer: str                  # the scoring model(s)
    curves: List[Curve] = field(default_factory=list)
    files: List[Path] = field(default_factory=list)

    def table(self) -> str:
        from mindrl.eval.report import markdown  # noqa: PLC0415

        f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        rows = [[c.label, str(c.responses), f"{c.mean_length:.1f}"] + [f(x) for x in c.thirds()]
                for c in self.curves]
        head = ["curve", "responses", "mean len", f"Q{self.q:g} first third",
                "middle third", "last third"]
        return markdown(head, rows)


# --------------------------------------------------------------------------- scoring
def _vocab_size(model_dir: str) -> Optional[int]:
    p = Path(model_dir) / "config.json"
    try:
        cfg = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    v = cfg.get("vocab_size") or (cfg.get("text_config") or {}).get("vocab_size")
    return int(v) if v else None


def resolve_model(spec: str, what: str) -> str:
    from mindrl.models.tiny import check_model_dir, resolve_model_path  # noqa: PLC0415

    try:
        path = resolve_model_path(spec)
        check_model_dir(path)
    except (ValueError, FileNotFoundError) as e:
        raise AnalyzeError(f"{what} '{spec}': {e}") from None
    return str(path)


def check_vocabulary(model_dir: str, what: str, spec: str,
                     sequences: Sequence[Tuple[str, Sequence[int]]]) -> None:
    """Every token id must be < the model's vocabulary size; names the model and the first
    offending sequence (its description is the first item of each pair)."""
    vocab = _vocab_size(model_dir)
    if vocab is None:
        return
    for where, ids in sequences:
        top = max(ids, default=-1)
        if top >= vocab:
            raise AnalyzeError(f"{what} '{spec}' has a vocabulary of {vocab} tokens but {where} "
                               f"holds token id {top}: the responses were made with another "
                               f"tokenizer; score them under a model of the same family")


def check_tokenizer(tokenizer, what: str, spec: str,
                    prompts: Sequence[Tuple[str, str, Sequence[int]]]) -> None:
    """The scoring tokenizer must encode each prompt text to the ids stored with it."""
    for where, text, ids in prompts:
        mine = tokenizer.encode(text, add_special_tokens=False)
        if list(mine) != list(ids):
            raise AnalyzeError(f"{what} '{spec}' tokenizes {where} differently from the "
                               f"tokenizer the rollouts were made with ({len(mine)} vs "
                               f"{len(ids)} tokens): another vocabulary; score them under a "
                               f"model with the same tokenizer")


class Scorer:
    """A checkpoint loaded in a training backend, used only for ``logprobs``."""

    def __init__(self, model_dir: str, backend: str = "torch", device: str = "cpu",
                 dtype: str = "float32", threads: int = 1):
        from mindrl.backends.base import build_backend  # noqa: PLC0415
        from mindrl.config.schema import RunConfig  # noqa: PLC0415

        cfg = RunConfig()
        cfg = dataclasses.replace(
            cfg, backend=backend, device=device,
            model=dataclasses.replace(cfg.model, path=model_dir, dtype=dtype),
            train=dataclasses.replace(cfg.train, threads=threads))
        self.backend = build_backend(backend, cfg)
        self.tokenizer = self.backend.tokenizer
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)

    def score(self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]],
              temperature: float = 1.0, batch_size: int = 8) -> List[np.ndarray]:
        """log pi(y_t | x, y_<t) per response, in input order; batches of similar length."""
        from mindrl.types import pad_token_batch  # noqa: PLC0415

        order = sorted(range(len(response_ids)),
                       key=lambda i: (len(response_ids[i]), len(prompt_ids[i])))
        out: List[Optional[np.ndarray]] = [None] * len(order)
        for s in range(0, len(order), batch_size):
            rows = order[s:s + batch_size]
            tb = pad_token_batch([list(prompt_ids[i]) for i in rows],
                                 [list(response_ids[i]) for i in rows], self.pad_id)
            lp = self.backend.logprobs(tb, temperature=temperature, micro_batch_size=batch_size)
            for k, i in enumerate(rows):
                out[i] = lp[k, :len(response_ids[i])].astype(np.float64)
        return out  # type: ignore[return-value]

    def close(self) -> None:
        self.backend = None
        import gc  # noqa: PLC0415

        gc.collect()


def run_base_model(run_dir) -> Optional[str]:
    """The model a training run started from (``model.path`` of its config.yaml)."""
    import yaml  # noqa: PLC0415

    p = Path(run_dir) / "config.yaml"
    if not p.is_file():
        return None
    try:
        return ((yaml.safe_load(p.read_text()) or {}).get("model") or {}).get("path")
    except yaml.YAMLError:
        return None


# --------------------------------------------------------------------------- RL
def rl_quantiles(run_dir, reference: Optional[str] = None, q: float = 0.01,
                 steps: Optional[Sequence[int]] = None, backend: str = "torch",
                 device: str = "cpu", batch_size: int = 8, min_count: int = 1,
                 temperature: float = 1.0, threads: int = 1) -> QuantileResult:
    """Score the saved rollouts of ``steps`` (default: all) under ``reference`` (default: the
    run's starting model) and compute one curve per step."""
    by_step = load_steps(run_dir, steps)            # missing run / step: named before any load
    spec = reference or run_base_model(run_dir)
    if not spec:
        raise AnalyzeError(f"{run_dir}: no config.yaml naming the starting model; pass "
                           f"--reference CKPT")
    model_dir = resolve_model(spec, "reference")
    check_vocabulary(model_dir, "reference", spec,
                     [(f"step {s} rollout {r.get('index', k)}",
                       list(r["prompt_ids"]) + list(r["response_ids"]))
                      for s, recs in by_step.items() for k, r in enumerate(recs)])
    scorer = Scorer(model_dir, backend, device, threads=threads)
    try:
        firsts = [(f"the prompt of step {s} group {r['group']}", r["prompt"], r["prompt_ids"])
                  for s, recs in by_step.items() for r in recs[:1] if "prompt" in r]
        check_tokenizer(scorer.tokenizer, "reference", spec, firsts)
        res = QuantileResult("rl", q, spec)
        for s, recs in sorted(by_step.items()):
            lps = scorer.score([r["prompt_ids"] for r in recs], [r["response_ids"] for r in recs],
                               temperature, batch_size)
            pos, val, cnt = position_quantiles(lps, q, min_count)
            res.curves.append(Curve(f"step {s}", float(s), pos, val, cnt, len(recs),
                                    float(np.mean([len(x) for x in lps])) if lps else 0.0))
    finally:
        scorer.close()
    return res


# --------------------------------------------------------------------------- SFT
def _meta_template(model_dir: str) -> Optional[str]:
    p = Path(model_dir) / "mindrl_meta.json"
    if p.is_file():
        try:
            return json.loads(p.read_text()).get("chat_template")
        except json.JSONDecodeError:
            return None
    return None


def encode_sft_rows(data_file, tokenizer, template: Optional[str], model_dir: str,
                    problem_field: str = "", response_field: str = "", limit: int = 0,
                    system_prompt: str = "") -> Tuple[List[List[int]], List[List[int]], str]:
    """(prompt ids, response ids, template) of a data file's rows, tokenized as SFT trains on
    them: the rendered prompt, then the response and the end-of-turn token."""
    from mindrl.data.io import pick_field, read_rows  # noqa: PLC0415
    from mindrl.data.templates import TEMPLATES, render_prompt  # noqa: PLC0415

    rows = read_rows(data_file, max_rows=limit or None)
    if not rows:
        raise AnalyzeError(f"{data_file}: no rows")
    template = template or _meta_template(model_dir) or \
        ("model" if getattr(tokenizer, "chat_template", None) else "none")
    if template not in TEMPLATES:
        raise AnalyzeError(f"unknown chat template '{template}'; valid: "
                           f"{', '.join(TEMPLATES.names())}")
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if not isinstance(eot, int) or eot == tokenizer.unk_token_id:
        eot = tokenizer.eos_token_id
    prompts, responses = [], []
    for i, row in enumerate(rows, 1):
        pf = pick_field(row, [problem_field] if problem_field else
                        ["problem", "question", "prompt"], data_file, i, "problem")
        rf = pick_field(row, [response_field] if response_field else
                        ["response", "completion", "answer"], data_file, i, "response")
        text = render_prompt(str(row[pf]), template, tokenizer=tokenizer,
                             system_prompt=system_prompt)
        prompts.append(tokenizer.encode(text, add_special_tokens=False))
        resp = tokenizer.encode(str(row[rf]), add_special_tokens=False)
        responses.append(resp + ([eot] if eot is not None else []))
    return prompts, responses, template


def sft_quantiles(data_file, checkpoints: Sequence[str], q: float = 0.01,
                  template: Optional[str] = None, problem_field: str = "",
                  response_field: str = "", limit: int = 256, backend: str = "torch",
                  device: str = "cpu", batch_size: int = 8, min_count: int = 1,
                  threads: int = 1) -> QuantileResult:
    """Score a data file's responses under each checkpoint (before SFT first, then after):
    one curve per checkpoint. The rows are tokenized once, with the first checkpoint's
    tokenizer; every other checkpoint must tokenize them the same way."""
    if len(checkpoints) < 1:
        raise AnalyzeError("--checkpoints: give at least one checkpoint (before SFT first)")
    dirs = [resolve_model(c, "checkpoint") for c in checkpoints]
    res = QuantileResult("sft", q, ", ".join(checkpoints))
    prompts = responses = None
    first_text = None
    for k, (spec, model_dir) in enumerate(zip(checkpoints, dirs)):
        if prompts is not None:
            check_vocabulary(model_dir, "checkpoint", spec,
                             [(f"{data_file} row {i + 1}", p + r)
                              for i, (p, r) in enumerate(zip(prompts, responses))])
        scorer = Scorer(model_dir, backend, device, threads=threads)
        try:
            if prompts is None:
                prompts, responses, template = encode_sft_rows(
                    data_file, scorer.tokenizer, template, model_dir, problem_field,
                    response_field, limit)
                first_text = scorer.tokenizer.decode(prompts[0], skip_special_tokens=False,
                                                     clean_up_tokenization_spaces=False)
            else:
                check_tokenizer(scorer.tokenizer, "checkpoint", spec,
                                [(f"the first prompt of {data_file}", first_text, prompts[0])])
            lps = scorer.score(prompts, responses, 1.0, batch_size)
        finally:
            scorer.close()
        pos, val, cnt = position_quantiles(lps, q, min_count)
        name = Path(spec).name or spec                 # runs/x/checkpoints/step_000100/model
        if name == "model" and Path(spec).parent.name:
            name = Path(spec).parent.name
        res.curves.append(Curve(name, float(k), pos, val, cnt, len(lps),
                                float(np.mean([len(x) for x in lps]))))
    return res


# --------------------------------------------------------------------------- output
def write_result(res: QuantileResult, out_dir, smooth: int = 1) -> List[Path]:
    """``logprob_quantiles.json`` (every curve) and ``logprob_quantiles.png``."""
    from mindrl.analyze.plots import plot_quantiles  # noqa: PLC0415

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    js = out / "logprob_quantiles.json"
    js.write_text(json.dumps({"kind": res.kind, "q": res.q, "scorer": res.scorer,
                              "curves": [c.to_json() for c in res.curves]}, indent=1))
    png = plot_quantiles(res, out / "logprob_quantiles.png", smooth=smooth)
    res.files = [png, js]
    return res.files
