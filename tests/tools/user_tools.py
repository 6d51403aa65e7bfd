"""A user tool for the registry tests, loaded by import path (tests.tools.user_tools:add)."""


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


add.parameters = {"type": "object", "properties": {"a": {"type": "integer"},
                                                   "b": {"type": "integer"}},
                  "required": ["a", "b"]}


def shout(text):
    return text.upper()
