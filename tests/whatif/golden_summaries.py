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
    return sorted(SCENARIOS.glob("*.yaml"))


def summary_of(path: Path) -> dict:
    """The golden summary of one scenario file (deterministic: seeded streams)."""
    from testbed.scenario import load_scenario
    from testbed.sweep import simbridge

    sc = load_scenario(path)
    spec = simbridge.resolve_spec(sc)
    reps = min(sc.simulation.replications, GOLDEN_REPLICATIONS)
    s = simbridge.simulate_summary(spec, reps, sc.simulation.seed, sc.simulation.engine)
    facts = simbridge.spec_facts(spec)
    keep = ("replications", "seed", "engine", "policy", "wall_time_s", "ettr", "failures",
            "checkpoints", "breakdown_s", "failures_by_cause", "checkpoint_interval_s",
            "checkpoint_cost_s", "restart_s", "job_mtbf_s", "nodes", "work_s", "step_s")
    out = {k: s.get(k) for k in keep}
    out["analytical_wall_time_s"] = (s.get("analytical") or {}).get("wall_time_s")
    out["young_interval_s"] = facts["young_interval_s"]
    out["daly_interval_s"] = facts["daly_interval_s"]
    return {"scenario": path.name, "summary": out}


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
