"""Golden summaries of every scenario in ``scenarios/*.yaml``.

A golden summary is what the simulator says about a scenario — wall time, ETTR,
failures (mean and 95% CI), checkpoints, where the time went, failures by cause —
plus the resolved checkpoint interval, cost, restart and job MTBF, computed with the
scenario's own seed and ``min(replications, GOLDEN_REPLICATIONS)`` replications so
the whole library checks in seconds.

Regenerate after an intended change of the simulator or a scenario (then review
the diff of tests/whatif/golden/*.json like code)::

    .venv/bin/python -m tests.whatif.golden_summaries           # every scenario
    .venv/bin/python -m tests.whatif.golden_summaries quickstart  # just one
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
GOLDEN = Path(__file__).resolve().parent / "golden"
GOLDEN_REPLICATIONS = 50


def scenario_paths() -> list[Path]:
    """Scenario files that describe a simulated job (HPO-only scenarios have their own
    tests)."""
    import yaml
    return sorted(p for p in SCENARIOS.glob("*.yaml")
                  if "workload" in (yaml.safe_load(p.read_text()) or {}))


def summary_of(path: Path) -> dict:
    """The golden summary of one scenario file (deterministic: seeded streams)."""
    from simulators.run import simulate
    from testbed.app.resolve import resolve
    from testbed.scenario.schema import load_scenario

    sc = load_scenario(path)
    spec = resolve(sc)
    reps = min(sc.simulation.replications, GOLDEN_REPLICATIONS)
    s = simulate(spec, reps, sc.simulation.seed, sc.simulation.engine).to_dict()
    s.pop("scenario")
    s.pop("events_file")
    return {"scenario": path.name, "summary": s}


def write(path: Path) -> Path:
    target = GOLDEN / f"{path.stem}.json"
    target.write_text(json.dumps(summary_of(path), indent=2, sort_keys=True) + "\n")
    return target


def main(argv: list[str]) -> None:
    names = set(argv)
    for path in scenario_paths():
        if not names or path.stem in names:
            print(f"wrote {write(path).relative_to(REPO)}")


if __name__ == "__main__":
    main(sys.argv[1:])
