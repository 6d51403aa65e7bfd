"""Tools a model may call, chosen by name like rewards.

A tool is a :class:`Tool`: a ``name``, a JSON-schema ``parameters`` object describing its
arguments (what a ``<tool_call>`` must carry: :func:`check_arguments` holds each call to it),
and a callable ``fn(**arguments) -> str``. Built-in: ``python`` (runs ``code`` in the
sandbox, :mod:`mindrl.tools.sandbox`). Users add tools by import path, ``pkg.mod:function``:
the function's ``parameters`` attribute (a JSON schema) is used when present, else its
keyword parameters become required string arguments.

User tools run IN the trainer process (they are the user's own trusted code, not the model's);
only the ``python`` tool runs model-written code, and only inside the sandbox.
"""

from __future__ import annotations

import importlib
import inspect
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Sequence

from mindrl.registry import Registry, RegistryError

TOOLS: Registry = Registry("tool")
_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
          "object": dict, "array": list}


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: Dict[str, Any]             # JSON schema of the arguments (type: object)
    fn: Callable[..., str]
    description: str = ""
    sandboxed: bool = False                # True: fn needs a SandboxPool (keyword ``pool``)


@dataclass
class ToolCall:
    name: str
    arguments: Dict[str, Any] = field(default_factory=dict)
    error: str = ""                        # set when the call could not be parsed


@dataclass
class ToolOutput:
    text: str                              # what the model is shown
    verdict: str                           # ok, error, timeout, memory, killed
    truncated: bool = False


def register_tool(name: str, parameters: Mapping[str, Any], description: str = "",
                  sandboxed: bool = False):
    """``@register_tool("name", schema)`` on ``fn(**arguments) -> str``."""

    def add(fn):
        TOOLS.register(name, Tool(name, dict(parameters), fn, description, sandboxed))
        return fn

    return add


def check_arguments(tool: Tool, arguments: Any) -> str:
    """'' when ``arguments`` fit the tool's schema, else what is wrong (shown to the model)."""
    if not isinstance(arguments, dict):
        return f"arguments of {tool.name} must be a JSON object, got {type(arguments).__name__}"
    props = tool.parameters.get("properties", {})
    for key in tool.parameters.get("required", []):
        if key not in arguments:
            return f"{tool.name} needs argument '{key}'"
    for key, value in arguments.items():
        if key not in props:
            if tool.parameters.get("additionalProperties", True) is False:
                return f"{tool.name} has no argument '{key}' (it takes {', '.join(props)})"
            continue
        want = props[key].get("type")
        if want in _TYPES and (not isinstance(value, _TYPES[want]) or
                               (want in ("integer", "number") and isinstance(value, bool))):
            return f"argument '{key}' of {tool.name} must be {want}"
    return ""


@register_tool("python", {"type": "object", "properties": {"code": {
    "type": "string", "description": "Python source; what it prints is returned"}},
    "required": ["code"], "additionalProperties": False},
    "Run Python code in a sandbox and return its stdout and stderr.", sandboxed=True)
def python_tool(code: str, pool=None) -> ToolOutput:
    res = pool.run(code)
    text = res.output
    if res.verdict == "timeout":
        text += f"\nTimeoutError: {res.detail}"
    elif res.verdict == "memory" and "MemoryError" not in text:
        text += "\nMemoryError"
    elif res.verdict == "killed":
        text += f"\nKilled ({res.detail})"
    return ToolOutput(text.strip("\n"), res.verdict, res.truncated)


def _import_tool(path: str) -> Tool:
    mod_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as e:
        raise RegistryError(f"cannot load tool '{path}': {e}") from None
    if isinstance(obj, Tool):
        return obj
    if not callable(obj):
        raise RegistryError(f"tool '{path}' is not callable: {obj!r}")
    schema = getattr(obj, "parameters", None)
    if schema is None:
        names = [n for n, p in inspect.signature(obj).parameters.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        schema = {"type": "object", "properties": {n: {"type": "string"} for n in names},
                  "required": names}
    name = getattr(obj, "tool_name", None) or attr.rsplit(".", 1)[-1]
    return Tool(name, dict(schema), obj, inspect.getdoc(obj) or "")


def resolve_tool(name_or_path: str) -> Tool:
    """A registered tool (``python``) or a user tool by import path (``pkg.mod:fn``)."""
    if name_or_path in TOOLS:
        return TOOLS.get(name_or_path)
    if ":" in name_or_path or "." in name_or_path:
        return _import_tool(name_or_path)
    return TOOLS.get(name_or_path)          # raises, listing the valid names


class ToolExecutor:
    """Runs parsed calls: the sandboxed ``python`` tool on a :class:`SandboxPool`, user tools on
    a thread pool; an unknown tool, bad arguments or an exception become an ``error`` output
    for the model, never an exception in the trainer."""

    def __init__(self, tools: Sequence[Tool], pool=None, workers: int = 4):
        self.tools = {t.name: t for t in tools}
        self.pool = pool
        self._exec = ThreadPoolExecutor(max_workers=max(1, workers),
                                        thread_name_prefix="tool")

    def submit(self, call: ToolCall) -> "Future[ToolOutput]":
        return self._exec.submit(self.run, call)

    def run(self, call: ToolCall) -> ToolOutput:
        if call.error:
            return ToolOutput(f"Error: {call.error}", "error")
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolOutput(f"Error: unknown tool '{call.name}'; available: "
                              f"{', '.join(sorted(self.tools))}", "error")
        bad = check_arguments(tool, call.arguments)
        if bad:
            return ToolOutput(f"Error: {bad}", "error")
        try:
            if tool.sandboxed:
                if self.pool is None:
                    return ToolOutput("Error: no sandbox configured", "error")
                out = tool.fn(**call.arguments, pool=self.pool)
            else:
                out = tool.fn(**call.arguments)
        except Exception as e:  # noqa: BLE001  (a user tool's failure is the model's output)
            return ToolOutput(f"Error: {type(e).__name__}: {e}", "error")
        return out if isinstance(out, ToolOutput) else ToolOutput(str(out), "ok")

    def close(self) -> None:
        self._exec.shutdown(wait=True)


def build_tools(names: Sequence[str]) -> List[Tool]:
    tools = [resolve_tool(n) for n in names]
    seen = [t.name for t in tools]
    dup = sorted({n for n in seen if seen.count(n) > 1})
    if dup:
        raise RegistryError(f"tools listed twice: {', '.join(dup)}")
    return tools

