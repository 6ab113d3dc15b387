"""The one measurement method every harness shares: warm-up, rounds, median, wall clock.

``testbed real-run profile``, ``testbed calibrate-local`` and the Slurm calibration job
all time training steps the same way (:mod:`real_runs.stepbench`), so the same
configuration measured by any of them gives the same figure:

* **warm-up**: the first :attr:`Method.warmup` steps of a configuration (allocator,
  kernel choice, lazy imports, a framework's graph tracing) are run and not counted;
* **rounds**: then :attr:`Method.rounds` rounds of :attr:`Method.steps` steps each; when
  several configurations are measured together the rounds go round-robin over all of
  them, so a burst of load on a shared machine spoils one round of each, not every
  step of one;
* **median**: the figure is the median over rounds of each round's median step — robust
  to a spoiled round and to single slow steps — with the fastest and slowest round's
  medians as its spread and the robust standard deviation of one step
  (1.4826 × median absolute deviation) as its jitter;
* **wall clock**: a step is timed as a run lives it — fetching the batch, forward,
  backward, the optimizer — on ``time.perf_counter`` (the process's CPU time is kept
  beside it); restarts and checkpoints are timed on the same clock, so a replay prices
  every part of a run alike;
* **where it ran**: the process's CPU affinity, its library threads (one: the harness
  children run single-threaded, :func:`real_runs.env.child_env`) and the machine's
  one-minute load average when the measurement started are recorded in every
  record's ``method`` (:class:`testbed.measurements.Method`).

A time budget per configuration and round (:attr:`Method.budget_s`) caps the steps of
a slow configuration, never below :data:`MIN_STEPS`.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: Fewest timed steps of a configuration in one round, whatever its budget.
MIN_STEPS = 3
#: Consistency constant of the median absolute deviation for a normal distribution.
MAD_TO_SIGMA = 1.4826
#: The default method (what ``real-run profile`` and the calibration designs use unless
#: told otherwise).
DEFAULT_WARMUP = 3
DEFAULT_ROUNDS = 3
DEFAULT_STEPS = 10
DEFAULT_BUDGET_S = 0.5


@dataclass(frozen=True)
class Method:
    """Warm-up steps, rounds, steps per round and the time budget of one round."""

    warmup: int = DEFAULT_WARMUP
    rounds: int = DEFAULT_ROUNDS
    steps: int = DEFAULT_STEPS
    budget_s: float = DEFAULT_BUDGET_S

    def checked(self) -> Method:
        from testbed.errors import InputError
        if self.warmup < 0:
            raise InputError("must be >= 0", field="--warmup")
        for name in ("rounds", "steps"):
            if getattr(self, name) < 1:
                raise InputError("must be positive", field=f"--{name}")
        if self.warmup > 10_000 or self.rounds > 1000 or self.steps > 10**6:
            raise InputError("warm-up ≤ 10,000 steps, rounds ≤ 1,000 and steps ≤ 10⁶ "
                             "(a measurement, not a training run)", field="--rounds")
        if not self.budget_s > 0:
            raise InputError("must be positive", field="--budget-s")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def affinity() -> str:
    """The CPUs this process may run on, as ranges (``"0-1"``; empty off Linux)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return ""
    ranges, start = [], None
    for i, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if i + 1 == len(cpus) or cpus[i + 1] != cpu + 1:
            ranges.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(ranges)


def load_1m() -> float | None:
    """The machine's one-minute load average (None where the system does not say)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def threads() -> int:
    """Library threads of this process (``OMP_NUM_THREADS``; the harness children run 1)."""
    try:
        return max(int(os.environ.get("OMP_NUM_THREADS", "1")), 1)
    except ValueError:
        return 1


def method_fields(*, warmup: int, rounds: int, samples_per_round: int, statistic: str,
                  clock: str = "wall", load: float | None = None) -> dict[str, Any]:
    """A record's ``method`` (:class:`testbed.measurements.Method`) for this process."""
    return {"warmup": warmup, "rounds": rounds, "samples_per_round": samples_per_round,
            "statistic": statistic, "clock": clock, "threads": threads(),
            "affinity": affinity(), "load_1m": load}


@dataclass(frozen=True)
class Summary:
    """The figure of rounds of samples (see the module docstring)."""

    value: float
    round_lo: float
    round_hi: float
    jitter: float
    samples: int


def summarise(rounds: Sequence[Sequence[float]]) -> Summary:
    """Median of round medians, the spread of the round medians, the robust standard
    deviation of one sample over all rounds."""
    rounds = [list(r) for r in rounds if len(r)]
    if not rounds:
        raise ValueError("no samples to summarise")
    medians = [statistics.median(r) for r in rounds]
    pooled = [x for r in rounds for x in r]
    centre = statistics.median(pooled)
    mad = statistics.median(abs(x - centre) for x in pooled)
    return Summary(value=statistics.median(medians), round_lo=min(medians),
                   round_hi=max(medians), jitter=MAD_TO_SIGMA * mad, samples=len(pooled))


def split_rounds(samples: Sequence[float], rounds: int) -> list[list[float]]:
    """Consecutive samples as ``rounds`` blocks (a run that cannot interleave with other
    configurations, e.g. a data-parallel group, takes its rounds one after another)."""
    samples = list(samples)
    rounds = max(1, min(rounds, len(samples)))
    size, extra = divmod(len(samples), rounds)
    out, start = [], 0
    for i in range(rounds):
        end = start + size + (1 if i < extra else 0)
        out.append(samples[start:end])
        start = end
    return [r for r in out if r]
