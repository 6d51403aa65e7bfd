"""Reward specs and gold labels as reward columns: the part of every framework adapter and of
the reward server that is plain data handling (no framework, no worker process).

A framework hands a reward a completion and a "label" / "ground truth": a gold answer string,
or a structured record (Countdown's ``{"target": 21, "numbers": [...]}``, a K&K solution). mindrl
rewards read named columns (``answer``, ``solution``, ``nums``, ``target``, ``names``), so:

  - a string (or number) label becomes ``answer`` and ``solution`` (the math, GSM8K and K&K
    rewards read one of them);
  - a dict, or a string holding a JSON object, gives its keys as columns (``numbers`` is also
    given as ``nums``, the name TinyZero's Countdown data uses); a missing key is None.

Rewards are named by a spec string ``"accuracy:1.0,format:0.5"`` (weight defaults to 1) or a
list of config entries.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

#: Rewards used when a framework names only a data set (verl's ``data_source``).
DATA_SOURCE_REWARDS: Dict[str, str] = {
    "openai/gsm8k": "gsm8k_accuracy",
    "gsm8k": "gsm8k_accuracy",
    "countdown": "countdown_equation",
    "knights_knaves": "kk_answer",
    "kk_logic": "kk_answer",
}
DEFAULT_REWARDS = "accuracy"        # the math grader, for every other data source

#: End-of-sequence tokens stripped from the end of a decoded completion.
EOS_SUFFIXES = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<｜end▁of▁sentence｜>")

Spec = Union[str, Sequence[Any]]


def parse_reward_spec(spec: Spec) -> List[Dict[str, Any]]:
    """Config entries from ``"accuracy:1,format:0.5"`` (or entries / names passed as a list).

    >>> parse_reward_spec("accuracy, format:0.5")
    [{'name': 'accuracy', 'weight': 1.0}, {'name': 'format', 'weight': 0.5}]

    A string that starts with ``[`` is a JSON list of entries with parameters (a judge's or a
    reward model's): ``'[{"name": "judge", "params": {"model": "DIR"}}]'``.
    """
    if isinstance(spec, str) and spec.lstrip().startswith("["):
        import json

        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise ValueError(f"reward spec starts with '[' but is not a JSON list: {e}") \
                from None
        if not isinstance(spec, list) or not spec:
            raise ValueError("a JSON reward spec must be a non-empty list of entries")
    if isinstance(spec, str):
        out = []
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            name, _, weight = part.rpartition(":") if _has_weight(part) else (part, "", "")
            try:
                out.append({"name": name.strip(), "weight": float(weight) if weight else 1.0})
            except ValueError:
                raise ValueError(f"bad weight in reward spec '{part}'") from None
        if not out:
            raise ValueError("empty reward spec")
        return out
    return [{"name": e, "weight": 1.0} if isinstance(e, str) else dict(e) for e in spec]


def _has_weight(part: str) -> bool:
    head, sep, tail = part.rpartition(":")
    if not sep:
        return False
    try:
        float(tail)
        return True
    except ValueError:
        return False        # an import path "pkg.mod:fn" has no weight


def rewards_for_data_source(data_source: Optional[str]) -> str:
    """The reward spec for a data set name (case-insensitive, prefix ``countdown``/``kk`` too)."""
    ds = (data_source or "").lower()
    if ds in DATA_SOURCE_REWARDS:
        return DATA_SOURCE_REWARDS[ds]
    for key, spec in DATA_SOURCE_REWARDS.items():
        if ds.startswith(key) or ds.endswith("/" + key):
            return spec
    return DEFAULT_REWARDS


def label_columns(label: Any) -> Dict[str, Any]:
    """The columns one label gives (see the module docstring)."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            parsed = json.loads(label)
        except (ValueError, RecursionError):     # not JSON, too deep, a number too long
            parsed = None
        if isinstance(parsed, dict):
            label = parsed
    if isinstance(label, Mapping):
        cols = dict(label)
        if "numbers" in cols and "nums" not in cols:
            cols["nums"] = cols["numbers"]
        if "ground_truth" in cols and "answer" not in cols:
            cols["answer"] = cols["ground_truth"]
        return cols
    if hasattr(label, "tolist"):           # numpy arrays / scalars from a DataProto
        label = label.tolist()
    return {"answer": label, "solution": label}


def columns_from_labels(labels: Sequence[Any]) -> Dict[str, List[Any]]:
    """Aligned columns for a batch of labels (missing keys are None).

    >>> columns_from_labels(["4", '{"target": 7, "numbers": [3, 4]}'])["nums"]
    [None, [3, 4]]
    """
    rows = [label_columns(lab) for lab in labels]
    keys: List[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    return {k: [r.get(k) for r in rows] for k in keys}


def completion_from_query(query: str, prompt: Optional[str]) -> str:
    """The response part of a decoded prompt + response, without a trailing EOS token.

    >>> completion_from_query("<|im_start|>user\\n1+1<|im_end|>\\nso 2<|im_end|>",
    ...                       "<|im_start|>user\\n1+1<|im_end|>\\n")
    'so 2'
    """
    text = query
    if prompt and text.startswith(prompt):
        text = text[len(prompt):]
    changed = True
    while changed:
        changed = False
        stripped = text.rstrip()
        for eos in EOS_SUFFIXES:
            if stripped.endswith(eos):
                text, changed = stripped[: -len(eos)], True
    return text
