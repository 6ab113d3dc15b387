"""Host-selection policies written by a user (loaded by name in the ops tests)."""

from __future__ import annotations

CALLS: list[int] = []


def fewest_repairs(candidates, count, rng):
    """Nodes with the fewest completed repairs first (ties: lowest id)."""
    CALLS.append(count)
    ranked = sorted(candidates, key=lambda c: (c.repairs, c.node))
    return [c.node for c in ranked[:count]]


def too_few(candidates, count, rng):
    """A broken policy: always one node short."""
    return [c.node for c in candidates[:count - 1]]


NOT_CALLABLE = 3
