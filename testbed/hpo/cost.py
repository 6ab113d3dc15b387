"""Seconds per epoch of each trial: a constant, a table, the oracle, or a measured trace.

* ``epoch_time: 1s`` — every epoch of every trial;
* ``cost: {table: […]}`` — rows of hyperparameter values and ``epoch_time``; a trial
  takes the first row whose values all equal its own (a CSV file with an
  ``epoch_time_s`` column works the same);
* ``cost: {oracle: {system, model, epoch_samples, …}}`` — the oracle's time per
  iteration for the trial's model, global batch (``batch_size``) and GPUs, times the
  iterations of an epoch (:func:`testbed.oracle.predict`, data parallelism unless
  ``strategy`` says otherwise); a configuration that does not fit is an error;
* ``cost: {trace: FILE.jsonl}`` — per-epoch times measured in a recorded sweep
  (``trial_result`` records, ``epoch_s``), per trial; an epoch it did not measure
  takes that trial's mean (past the last measured epoch, the last one's time), a
  trial it did not run the mean of all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testbed.errors import ScenarioError
from testbed.io.schema import positive_duration_s
from testbed.scenario.hpo import OracleCost


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or str(a).lower() == str(b).lower()
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return str(a) == str(b)


def _describe(config: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


class ConstantCost:
    """The same seconds for every epoch."""

    def __init__(self, epoch_s: float) -> None:
        self.epoch_s = float(epoch_s)

    def epoch_times(self, index: int, config: Mapping[str, Any], gpus: int) -> float:
        return self.epoch_s


class TableCost:
    """First matching row of (hyperparameter values → epoch time)."""

    def __init__(self, rows: Sequence[tuple[dict[str, Any], float]], *, source: str | None,
                 field: str) -> None:
        self.rows = list(rows)
        self.source, self.field = source, field

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], *, source: str | None,
                  field: str, key: str = "epoch_time") -> TableCost:
        out = []
        for i, row in enumerate(rows):
            try:
                seconds = positive_duration_s(row[key])
            except (KeyError, ValueError) as exc:
                raise ScenarioError(f"row {i + 1}: {key!r}: {exc}", source=source,
                                    field=field) from None
            out.append(({k: v for k, v in row.items() if k != key}, seconds))
        return cls(out, source=source, field=field)

    def epoch_times(self, index: int, config: Mapping[str, Any], gpus: int) -> float:
        for match, seconds in self.rows:
            if all(k in config and _same(config[k], v) for k, v in match.items()):
                return seconds
        raise ScenarioError(f"no row matches trial {index} ({_describe(config)})",
                            source=self.source, field=self.field)


class OracleEpochCost:
    """Epoch time from the oracle, cached per (model, batch, GPUs)."""

    def __init__(self, spec: OracleCost, *, source: str | None, field: str) -> None:
        self.spec = spec
        self.source, self.field = source, field
        self._cache: dict[tuple, float] = {}

    def epoch_times(self, index: int, config: Mapping[str, Any], gpus: int) -> float:
        s = self.spec
        model = config.get("model", s.model)
        batch = config.get(s.batch_key)
        if model is None:
            raise ScenarioError("give 'model' here or a 'model' key in the space",
                                source=self.source, field=f"{self.field}.model")
        if not isinstance(batch, int) or isinstance(batch, bool) or batch <= 0:
            raise ScenarioError(f"trial {index} needs a whole-number {s.batch_key!r} > 0 in "
                                "its configuration for the oracle", source=self.source,
                                field=f"{self.field}.batch_key")
        key = (str(model), batch, max(gpus, 1))
        if key not in self._cache:
            self._cache[key] = self._predict(*key)
        return self._cache[key]

    def _predict(self, model: str, batch: int, gpus: int) -> float:
        from testbed.oracle import predict
        from testbed.units import parse_shape
        s = self.spec
        shape = parse_shape(s.input_shape, source=self.source,
                            field=f"{self.field}.input_shape") if s.input_shape else None
        est = predict(s.system, model, s.strategy if gpus > 1 else "serial", gpus, batch,
                      input_shape=shape, precision=s.precision, optimizer=s.optimizer,
                      epoch_samples=s.epoch_samples)
        if not est.feasible or est.epoch_s is None:
            raise ScenarioError(f"{model} with batch {batch} on {gpus} GPU(s) cannot run: "
                                f"{est.reason}", source=self.source, field=self.field)
        return float(est.epoch_s)


class MeasuredCost:
    """Per-epoch seconds measured per trial (from a recorded trace)."""

    def __init__(self, per_trial: Mapping[int, Mapping[int, float]]) -> None:
        self.per_trial: dict[int, tuple[float, ...]] = {}
        values = []
        for trial, epochs in per_trial.items():
            if not epochs:
                continue
            mean = sum(epochs.values()) / len(epochs)
            top = max(epochs)
            self.per_trial[int(trial)] = tuple(float(epochs.get(e, mean))
                                               for e in range(1, top + 1))
            values += list(epochs.values())
        self.mean_s = sum(values) / len(values) if values else 0.0

    def epoch_times(self, index: int, config: Mapping[str, Any], gpus: int
                    ) -> float | tuple[float, ...]:
        return self.per_trial.get(index, self.mean_s)
