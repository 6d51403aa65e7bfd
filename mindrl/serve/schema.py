"""Request bodies of the reward server as pydantic models, and their errors as one line each.

Bodies are parsed and validated in one step (``Model.model_validate_json``: pydantic's JSON
parser, which refuses nesting deeper than its recursion limit and numbers out of range instead
of raising ``RecursionError`` / ``ValueError`` the way ``json.loads`` does). Types are strict: a
number is not a string, a string is not a list. What a field holds:

  /score     completions  list of strings
             columns      object: column name -> list (one entry per completion, any JSON);
                          ``completions`` and ``rewards`` are not column names
             rewards      list of reward names, or object name -> weight (a finite number, or
                          null for the configured weight); optional
  /openrlhf  query        list of strings (prompt + response as OpenRLHF decoded it)
             prompts      list of strings (or null), one per query; optional
             labels       list, one per query: a gold answer, or an object / a JSON-object
                          string whose keys become columns; optional

The models check their own cross-field rules too (column lengths, reserved names; a
validator raises :class:`BadRequest`, which pydantic lets through as it is). A wrong body is
a :class:`BadRequest` naming the field (``completions[1]``,
``columns.answer``, ``rewards.accuracy``, ``labels[0].rewards``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, StrictStr, Tag,
                      ValidationError, model_validator)
from typing_extensions import Annotated

from mindrl.serve.labels import label_columns

#: Column names a request may not use: a reward is called ``fn(completions, **columns)`` and the
#: service takes the selection as ``rewards=``.
RESERVED_COLUMNS = ("completions", "rewards")

Weight = Annotated[float, Field(allow_inf_nan=False, strict=True)]
RewardSelection = Annotated[
    Union[Annotated[List[StrictStr], Tag("list")],
          Annotated[Dict[str, Optional[Weight]], Tag("object")]],
    Discriminator(lambda v: "list" if isinstance(v, list) else "object" if isinstance(v, dict)
                  else None,
                  custom_error_type="reward_selection",
                  custom_error_message="must be a list of reward names or an object "
                                       "name -> weight")]
_UNION_TAGS = {"list", "object"}


class BadRequest(Exception):
    """A body the server refuses: HTTP ``status``, the ``field`` at fault and a one-line
    ``message`` (``"<field>: <what is wrong>"``); ``details`` lists every problem found."""

    def __init__(self, status: int, reason: str, message: str, field: Optional[str] = None,
                 details: Optional[List[Dict[str, str]]] = None):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message
        self.field = field
        self.details = details or ([{"field": field, "message": message}] if field else [])


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    completions: List[StrictStr]
    columns: Optional[Dict[str, List[Any]]] = None
    rewards: Optional[RewardSelection] = None

    @model_validator(mode="after")
    def _columns_fit(self) -> "ScoreRequest":
        check_columns(self.columns or {}, len(self.completions))
        return self


class OpenRLHFRequest(BaseModel):
    # OpenRLHF's client sends exactly these three keys; anything else is ignored
    model_config = ConfigDict(extra="ignore", strict=True)

    query: List[StrictStr]
    prompts: Optional[List[Optional[StrictStr]]] = None
    labels: Optional[List[Any]] = None

    @model_validator(mode="after")
    def _aligned(self) -> "OpenRLHFRequest":
        check_same_length([("query", self.query), ("prompts", self.prompts),
                           ("labels", self.labels)])
        for i, label in enumerate(self.labels or []):
            for key in label_columns(label):
                if key in RESERVED_COLUMNS:
                    raise field_error(f"labels[{i}].{key}", f"'{key}' is reserved and cannot be "
                                      f"a label key (reserved: {', '.join(RESERVED_COLUMNS)})")
        return self


def field_path(loc: Sequence[Union[str, int]]) -> str:
    """``("completions", 1)`` -> ``completions[1]``; ``("columns", "answer")`` ->
    ``columns.answer`` (the union tag of ``rewards`` is left out)."""
    parts: List[str] = []
    for i, p in enumerate(loc):
        if i == 1 and loc[0] == "rewards" and p in _UNION_TAGS:
            continue
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts) or "body"


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _message(err: Dict[str, Any]) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "json_invalid":
        return f"malformed JSON: {err.get('ctx', {}).get('error', msg)}"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a field of this request"
    msg = msg[0].lower() + msg[1:] if msg else kind
    if kind.endswith("_type") and "input" in err:
        msg += f", got {json_type(err['input'])}"
    return msg


def parse(model, raw: bytes):
    """``model`` validated from the raw body, or :class:`BadRequest` (400 for malformed JSON,
    422 for a wrong shape), naming the first field at fault and listing up to 20."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        errors = e.errors(include_url=False)
    if errors and errors[0]["type"] == "json_invalid":
        msg = _message(errors[0])
        raise BadRequest(400, "malformed_json", msg) from None
    if errors and errors[0]["type"] == "model_type":
        raise BadRequest(422, "bad_request", "the request body must be a JSON object") from None
    details = [{"field": field_path(err["loc"]), "message": _message(err)} for err in errors[:20]]
    first = details[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    raise BadRequest(422, "bad_request", f"{first['field']}: {first['message']}{more}",
                     field=first["field"], details=details) from None


def field_error(field: str, what: str, status: int = 422) -> BadRequest:
    """A :class:`BadRequest` for one field: ``"<field>: <what>"``."""
    return BadRequest(status, "bad_request", f"{field}: {what}", field=field,
                      details=[{"field": field, "message": what}])


def check_columns(columns: Dict[str, List[Any]], n: int, where: str = "columns") -> None:
    """Every column one entry per completion, no reserved name (BadRequest 422 otherwise)."""
    for name, values in columns.items():
        field = f"{where}.{name}"
        if name in RESERVED_COLUMNS:
            raise field_error(field, f"'{name}' is reserved and cannot be a column name "
                                     f"(reserved: {', '.join(RESERVED_COLUMNS)})")
        if len(values) != n:
            raise field_error(field, f"has {len(values)} entries for {n} completions (one per "
                                     "completion)")


def check_same_length(fields: Sequence[Tuple[str, Optional[list]]]) -> int:
    """The common length of the lists given (None = absent), or BadRequest naming the odd one."""
    name0, first = fields[0]
    n = len(first or [])
    for name, values in fields[1:]:
        if values is not None and len(values) != n:
            raise field_error(name, f"has {len(values)} entries for {n} in '{name0}' (one per "
                                    f"{name0})")
    return n
