"""A study's claim and what its data say about it.

A :class:`Verdict` names the claim, the verdict — ``supported``, ``contradicted`` or
``undecided`` — the evidence (the numbers it rests on, in words) and the rule that
decided it, so a reader can check the decision against the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

Outcome = Literal["supported", "contradicted", "undecided"]
OUTCOMES: tuple[str, ...] = ("supported", "contradicted", "undecided")


@dataclass(frozen=True)
class Verdict:
    """One claim judged by the data."""

    claim: str
    verdict: Outcome
    evidence: str
    rule: str
    scope: str = ""        # what it was judged on (a task, a framework); "" = the study

    def to_dict(self) -> dict:
        return asdict(self)


def combine(verdicts: Sequence[str]) -> Outcome:
    """All parts supported → supported; any contradicted → contradicted; else undecided."""
    if not verdicts:
        return "undecided"
    if any(v == "contradicted" for v in verdicts):
        return "contradicted"
    if all(v == "supported" for v in verdicts):
        return "supported"
    return "undecided"
