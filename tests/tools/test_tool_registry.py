"""The tools registry: built-in python tool, user tools by import path, argument checks, and
call parsing of both formats."""

import pytest

from mindrl.registry import RegistryError
from mindrl.tools.formats import find_call, render_output
from mindrl.tools.registry import (TOOLS, ToolCall, ToolExecutor, build_tools, check_arguments,
                                   resolve_tool)
from mindrl.tools.sandbox import Sandbox, SandboxLimits, SandboxPool


@pytest.fixture(scope="module")
def executor():
    pool = SandboxPool(Sandbox(SandboxLimits(timeout_s=6, memory_mb=512)), workers=2)
    ex = ToolExecutor(build_tools(["python", "user_tools:add",
                                   "user_tools:shout"]), pool, workers=2)
    yield ex
    ex.close()
    pool.close()


def test_python_tool_runs_in_the_sandbox(executor):
    out = executor.run(ToolCall("python", {"code": "import os\nprint(1234 * 5678, os.getcwd())"}))
    assert (out.verdict, out.text) == ("ok", "7006652 /tmp/work")
    out = executor.run(ToolCall("python", {"code": "while True: pass"}))
    assert out.verdict == "timeout" and out.text.endswith("TimeoutError: wall time 6s")


def test_user_tools_by_import_path(executor):
    assert executor.run(ToolCall("add", {"a": 2, "b": 40})).text == "42"
    assert executor.run(ToolCall("shout", {"text": "hi"})).text == "HI"
    # schema from the function's `parameters`, or its keyword parameters as required strings
    assert resolve_tool("user_tools:shout").parameters == {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    assert list(executor.tools) == ["python", "add", "shout"]


def test_bad_calls_become_error_outputs(executor):
    cases = [(ToolCall("add", {"a": 2}), "Error: add needs argument 'b'"),
             (ToolCall("add", {"a": "2", "b": 1}), "Error: argument 'a' of add must be integer"),
             (ToolCall("add", {"a": True, "b": 1}), "Error: argument 'a' of add must be integer"),
             (ToolCall("nope", {}), "Error: unknown tool 'nope'; available: add, python, shout"),
             (ToolCall("python", {"code": "1", "x": 1}),
              "Error: python has no argument 'x' (it takes code)"),
             (ToolCall("", {}, error="tool call is not valid JSON"),
              "Error: tool call is not valid JSON")]
    for call, text in cases:
        out = executor.run(call)
        assert (out.verdict, out.text) == ("error", text)


def test_user_tool_exception_is_the_models_output(executor):
    out = executor.run(ToolCall("shout", {"text": 3}))
    assert out.verdict == "error" and out.text.startswith("Error: argument 'text' of shout")
    out = ToolExecutor(build_tools(["user_tools:add"])).run(
        ToolCall("add", {"a": 1, "b": 1}))
    assert out.text == "2"


def test_registry_misses_list_names():
    with pytest.raises(KeyError, match="did you mean 'python'"):
        resolve_tool("pyton")
    with pytest.raises(RegistryError, match="cannot load tool 'no_such_mod:fn'"):
        resolve_tool("no_such_mod:fn")
    with pytest.raises(RegistryError, match="tools listed twice: python"):
        build_tools(["python", "python"])
    assert "python" in TOOLS
    assert check_arguments(TOOLS.get("python"), ["x"]).endswith("got list")


def test_find_call_tir():
    text = "Let me compute.\n```python\nprint(2+2)\n```\n```output\n5\n```"
    end, call = find_call(text, "tir")
    assert text[:end].endswith("print(2+2)\n```") and call.arguments == {"code": "print(2+2)\n"}
    assert find_call("```python\nprint(1)\n", "tir") is None        # not closed yet
    assert render_output("4", "tir") == "\n```output\n4\n```\n"


def test_find_call_chat():
    text = 'ok <tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call> more'
    end, call = find_call(text, "chat")
    assert text[:end].endswith("</tool_call>") and (call.name, call.arguments) == \
        ("add", {"a": 1, "b": 2})
    _, call = find_call('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1}"}</tool_call>',
                        "chat")
    assert call.arguments == {"a": 1}
    _, call = find_call("<tool_call>{oops</tool_call>", "chat")
    assert call.error.startswith("tool call is not valid JSON")
    _, call = find_call('<tool_call>["add"]</tool_call>', "chat")
    assert call.error.startswith("a tool call needs")
    assert render_output("3", "chat", after_eos=True) == (
        "\n<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n")
    assert render_output("3", "chat").startswith("<|im_end|>\n<|im_start|>user")


def test_tool_rl_refuses_to_run_without_isolation(capsys):
    # an interpreter the unprivileged uid can reach (the system python), so that only the
    # isolation decides
    from mindrl.errors import ConfigError
    from mindrl.tools.multi_turn import make_tool_rollout

    with pytest.raises(ConfigError, match="allow_unisolated=true"):
        make_tool_rollout(None, ["python"], isolation="none", python="/usr/bin/python3")
    loop = make_tool_rollout(None, ["python"], isolation="none", allow_unisolated=True,
                             python="/usr/bin/python3", workers=1)
    assert "sandbox isolation: none: NONE" in capsys.readouterr().out
    out = loop.executor.run(ToolCall("python", {"code": "import os\nprint(os.getuid())"}))
    loop.executor.close()
    loop.executor.pool.close()
    assert out.verdict == "ok" and out.text != "0"            # never root, even without isolation
    loop = make_tool_rollout(None, ["python"], isolation="auto", workers=1)
    assert "sandbox isolation: bwrap" in capsys.readouterr().out or \
        loop.executor.pool.sandbox.isolation == "unshare"
    loop.executor.close()
    loop.executor.pool.close()
