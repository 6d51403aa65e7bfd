"""The one base class for errors a user causes and can fix (a bad config key, a missing file, a
malformed row). The ``mindrl`` command prints them as one line and exits 2; anything else is a
bug and keeps its traceback. This module imports nothing, so every room of the house can use it.
"""

from __future__ import annotations


class UserError(Exception):
    """An error in the user's input: its message names the file, line, field or config key."""


class ConfigError(UserError, ValueError):
    """Bad configuration, raised before any expensive work starts."""


class LaunchError(UserError, RuntimeError):
    """The cluster cannot run this launch (placement, missing checkout on a node, a missing
    model directory found before any worker starts)."""
