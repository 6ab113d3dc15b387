"""Host-selection policies that misbehave, for ``testbed --allow-code`` (issue 20): a
policy the user asked to run may raise or answer nonsense; either is one line naming
``cluster.host_selection``, never a traceback from inside the simulator."""

from __future__ import annotations


def boom(candidates, count, rng):
    """Raises, as a policy with a bug does."""
    raise ZeroDivisionError("a bug in the user's policy")


def text(candidates, count, rng):
    """Answers with a string instead of node ids."""
    return "node 1"


def nothing(candidates, count, rng):
    """Answers with nothing."""
    return None


def foreign(candidates, count, rng):
    """Answers with nodes that are not idle."""
    return [10**6 + i for i in range(count)]
