"""What a simulated trial reports: a seeded learning curve, or a table of values.

Simulated sweeps need a metric so that ASHA, Hyperband and TPE have something to
rank and the summary has a best-so-far curve. ``objective: synthetic`` gives each
trial an exponentially decaying validation loss

    L(e) = L∞ + (L0 − L∞) · exp(−e / τ),   L0 = ln 10

(``ln 10`` is the cross-entropy of a uniform guess over 10 classes), where the
plateau L∞ = 0.05 + 0.6·q + noise depends on the configuration through q ∈ [0, 1], the
mean over keys of a seeded effect per categorical value (or the distance to a seeded
optimum within a range), and τ (3–15 epochs) and the noise are per trial. All draws
are keyed (:mod:`testbed.streams`), so trial ``i`` learns the same curve under
every scheduler. With ``mode: max`` the value is 1 − L/L0 (an accuracy-like score).

``objective:`` as a list of ``{trial, epoch, value}`` rows or a CSV file with those
columns replays recorded values: a trial reports the row of the largest epoch not
after the one asked (or its first row).
"""

from __future__ import annotations

import bisect
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from testbed.errors import ScenarioError
from testbed.scenario.hpo import Range
from testbed.streams import KeyedUniforms, generator

#: Cross-entropy of a uniform guess over 10 classes (nats): the loss at epoch 0.
L0 = math.log(10.0)
#: Keys that set the budget or the resources, not the model's quality.
NOT_QUALITY = frozenset({"epochs", "gpus"})


class SyntheticObjective:
    """The seeded learning curves described in the module docstring."""

    def __init__(self, space: Mapping[str, Any], seed: int, mode: str = "min") -> None:
        self.space = {k: v for k, v in space.items() if k not in NOT_QUALITY}
        self.mode = mode
        self.noise = KeyedUniforms(seed, "hpo.objective", 2)
        self.effects: dict[str, Any] = {}
        for key, values in self.space.items():
            rng = generator(seed, "hpo.objective", 1 << 20, zlib.crc32(key.encode()))
            if isinstance(values, Range):
                self.effects[key] = float(rng.random())
            else:
                draws = rng.random(len(values))
                self.effects[key] = {str(v): float(d) for v, d in zip(values, draws, strict=True)}
        self._plateau: dict[int, tuple[float, float]] = {}

    def _quality(self, config: Mapping[str, Any]) -> float:
        if not self.effects:
            return 0.5
        total = 0.0
        for key, eff in self.effects.items():
            if isinstance(eff, dict):
                total += eff.get(str(config.get(key)), 0.5)
            else:
                value = config[key]
                r = self.space[key]
                if r.log:
                    pos = (math.log(value) - math.log(r.low)) / (math.log(r.high) - math.log(r.low))
                else:
                    pos = (value - r.low) / (r.high - r.low)
                total += min(abs(pos - eff) * 1.5, 1.0)
        return total / len(self.effects)

    def value(self, index: int, config: Mapping[str, Any], epoch: float) -> float:
        got = self._plateau.get(index)
        if got is None:
            u = self.noise.row(index)
            plateau = max(0.05 + 0.6 * self._quality(config) + 0.05 * (float(u[0]) - 0.5), 0.01)
            got = (plateau, 3.0 + 12.0 * float(u[1]))
            self._plateau[index] = got
        plateau, tau = got
        loss = plateau + (L0 - plateau) * math.exp(-epoch / tau)
        return loss if self.mode == "min" else 1.0 - loss / L0


class TableObjective:
    """Recorded values per (trial, epoch)."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], *, source: str | None,
                 field: str) -> None:
        self.source, self.field = source, field
        per: dict[int, list[tuple[float, float]]] = {}
        for i, row in enumerate(rows):
            try:
                trial, epoch, value = int(row["trial"]), float(row["epoch"]), float(row["value"])
            except (KeyError, TypeError, ValueError):
                raise ScenarioError(f"row {i + 1} needs numbers 'trial', 'epoch' and 'value'",
                                    source=source, field=field) from None
            if not (math.isfinite(epoch) and math.isfinite(value)):
                raise ScenarioError(f"row {i + 1}: values must be finite", source=source,
                                    field=field)
            per.setdefault(trial, []).append((epoch, value))
        self.per = {t: sorted(v) for t, v in per.items()}

    def value(self, index: int, config: Mapping[str, Any], epoch: float) -> float:
        rows = self.per.get(index)
        if not rows:
            raise ScenarioError(f"no value for trial {index}", source=self.source,
                                field=self.field)
        i = bisect.bisect_right([e for e, _ in rows], epoch)
        return rows[max(i - 1, 0)][1]
