"""User tools for the registry tests, loaded by import path (``user_tools:add``): pytest puts
tests/tools on sys.path; a ``tests.`` path would be shadowed by the verl peer's own tests package."""


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


add.parameters = {"type": "object", "properties": {"a": {"type": "integer"},
                                                   "b": {"type": "integer"}},
                  "required": ["a", "b"]}


def shout(text):
    return text.upper()
