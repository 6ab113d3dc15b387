"""A policy module whose import leaves a mark: it must be imported only when the user
passes ``--allow-code`` (tests/sim/test_ops_inputs.py)."""

from __future__ import annotations

import os
from pathlib import Path

_marker = os.environ.get("TESTBED_PLANTED_MARKER")
if _marker:
    Path(_marker).write_text("imported\n")


def pick(candidates, count, rng):
    """The lowest ids first."""
    return [c.node for c in sorted(candidates, key=lambda c: c.node)[:count]]
