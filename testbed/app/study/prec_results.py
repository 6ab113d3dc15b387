"""Typed results of the precision study (accuracies as fractions, changes in percentage
points, MAE in the target's units; intervals are 95% two-level bootstrap intervals,
:mod:`testbed.precision.inference`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from testbed.app.study.verdict import Verdict
from testbed.precision.inference import Interval, PairedTest


def _d(value) -> dict | None:
    return None if value is None else value.to_dict()


@dataclass(frozen=True)
class BaselineScore:
    """A reference forecast on the test set."""

    name: str
    accuracy: Interval | None
    mae: Interval | None

    def to_dict(self) -> dict:
        return {"name": self.name, "accuracy": _d(self.accuracy), "mae": _d(self.mae)}


@dataclass(frozen=True)
class PrecisionStat:
    """One input precision over every seed, and its paired change from fp64."""

    precision: str
    kind: str
    bits_per_value: float
    bytes_per_value: float
    max_abs_error: float
    max_rel_error: float
    accuracy: Interval | None
    mae: Interval | None
    change_pp: PairedTest | None       # accuracy − fp64's, percentage points
    mae_change: PairedTest | None      # MAE − fp64's
    within_tolerance: str              # supported / contradicted / undecided
    in_claim: bool

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("accuracy", "mae", "change_pp", "mae_change"):
            out[key] = _d(getattr(self, key))
        return out


@dataclass(frozen=True)
class Curve:
    """A learning curve of one precision: per epoch, the mean over seeds."""

    precision: str
    epochs: tuple[int, ...]
    train_loss: tuple[float, ...]
    accuracy: tuple[float, ...] | None
    mae: tuple[float, ...] | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Sensitivity:
    """The fp64 network trained on other data (e.g. without the years with missing
    data), scored on the same test items, paired with the main fp64 network."""

    name: str
    split: str
    accuracy: Interval | None
    change_pp: PairedTest | None

    def to_dict(self) -> dict:
        return {"name": self.name, "split": self.split, "accuracy": _d(self.accuracy),
                "change_pp": _d(self.change_pp)}


@dataclass(frozen=True)
class TaskResult:
    """One task of the study: what was run, the baselines, every precision, the
    network's skill, the curves, what the data cannot show, and the verdict."""

    task: str
    kind: str                          # classification / count / regression
    target: str
    description: tuple[str, ...]
    framework: str
    seeds: tuple[int, ...]
    test_items: int
    blocks: int
    block_name: str
    baselines: tuple[BaselineScore, ...]
    best_baseline: str
    skill_pp: PairedTest | None        # fp64 network − best baseline, accuracy pp
    has_skill: bool
    precisions: tuple[PrecisionStat, ...]
    curves: tuple[Curve, ...]
    disclosures: tuple[str, ...]
    sensitivity: tuple[Sensitivity, ...]
    verdict: Verdict

    def to_dict(self) -> dict:
        return {"task": self.task, "kind": self.kind, "target": self.target,
                "description": list(self.description), "framework": self.framework,
                "seeds": list(self.seeds), "test_items": self.test_items,
                "blocks": self.blocks, "block_name": self.block_name,
                "baselines": [b.to_dict() for b in self.baselines],
                "best_baseline": self.best_baseline, "skill_pp": _d(self.skill_pp),
                "has_skill": self.has_skill,
                "precisions": [p.to_dict() for p in self.precisions],
                "curves": [c.to_dict() for c in self.curves],
                "disclosures": list(self.disclosures),
                "sensitivity": [s.to_dict() for s in self.sensitivity],
                "verdict": self.verdict.to_dict()}


@dataclass(frozen=True)
class PrecisionStudy:
    """The whole study: one :class:`TaskResult` per task, the claim judged per task."""

    quick: bool
    tolerance_pp: float
    claim_precisions: tuple[str, ...]
    tasks: tuple[TaskResult, ...]
    settings: dict = field(default_factory=dict)

    @property
    def claims(self) -> tuple[Verdict, ...]:
        return tuple(t.verdict for t in self.tasks)

    def to_dict(self) -> dict:
        return {"study": "precision", "quick": self.quick, "tolerance_pp": self.tolerance_pp,
                "claim_precisions": list(self.claim_precisions), "settings": self.settings,
                "tasks": [t.to_dict() for t in self.tasks],
                "claims": [c.to_dict() for c in self.claims]}
