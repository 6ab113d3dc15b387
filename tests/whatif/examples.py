"""The scenario library as small examples: each scenario's key figures, with the closed
form beside them where one holds (SimPy's examples are tests compared with stored
output; these are the same, kept to the figures a reader checks).

For every ``scenarios/*.yaml`` that describes a simulated job, ``tests/whatif/examples/
NAME.json`` holds what the simulator says with the scenario's seed and
``min(replications, EXAMPLE_REPLICATIONS)`` replications — mean wall time, ETTR,
failures, checkpoints and where the time went — plus what the scenario resolves to
(checkpoint interval and cost, restart, job MTBF), the closed-form expectation of the
wall time when the scenario's assumptions allow one, and **why** the figures were last
regenerated. ``tests/whatif/test_examples.py`` checks the figures (seeded streams: 1e-9
relative) and the closed form against the simulation (within 3.5 standard errors).

Regenerate after an intended change, saying why (the reason is stored in the file and
belongs in the commit message)::

    .venv/bin/python -m tests.whatif.examples --why "what changed and why" [NAME ...]

It prints every figure that moved (old → new) so the change can be reviewed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
EXAMPLES = Path(__file__).resolve().parent / "examples"
EXAMPLE_REPLICATIONS = 50
#: The key figures of a simulated summary (mean of each, over replications).
KEY_MEANS = ("wall_time_s", "ettr", "failures", "checkpoints")


def scenario_paths() -> list[Path]:
    """Scenario files that describe a simulated job (HPO-only scenarios have their own
    tests)."""
    import yaml
    return sorted(p for p in SCENARIOS.glob("*.yaml")
                  if "workload" in (yaml.safe_load(p.read_text()) or {}))


def figures_of(path: Path) -> dict:
    """The key figures of one scenario file (deterministic: seeded streams)."""
    from simulators.run import simulate
    from testbed.app.resolve import resolve
    from testbed.scenario.schema import load_scenario

    sc = load_scenario(path)
    spec = resolve(sc)
    reps = min(sc.simulation.replications, EXAMPLE_REPLICATIONS)
    s = simulate(spec, reps, sc.simulation.seed, sc.simulation.engine).to_dict()
    key = {k: s[k]["mean"] for k in KEY_MEANS}
    key["wall_time_std_s"] = s["wall_time_s"]["std"]
    key.update({f"{k}": v for k, v in s["breakdown_s"].items()})
    resolved = {k: s[k] for k in ("checkpoint_interval_s", "checkpoint_cost_s", "restart_s",
                                  "job_mtbf_s", "work_s", "nodes")}
    analytical = s.get("analytical") or {}
    closed = analytical.get("wall_time_s")
    return {"scenario": path.name, "replications": reps, "seed": sc.simulation.seed,
            "engine": s["engine"], "key": key, "resolved": resolved,
            "closed_form_wall_time_s": closed}


def _moved(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) or isinstance(b, dict):
            out += _moved(a or {}, b or {}, f"{prefix}{k}.")
        elif a != b and not (isinstance(a, float) and isinstance(b, float)
                             and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)):
            out.append(f"  {prefix}{k}: {a!r} → {b!r}")
    return out


def write(path: Path, why: str) -> list[str]:
    target = EXAMPLES / f"{path.stem}.json"
    new = figures_of(path)
    old = json.loads(target.read_text()) if target.exists() else {}
    old.pop("why", None)
    moved = _moved(old, new)
    if moved or not target.exists():
        EXAMPLES.mkdir(exist_ok=True)
        target.write_text(json.dumps({**new, "why": why}, indent=2, sort_keys=True,
                                     ensure_ascii=False) + "\n")
    return moved


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.whatif.examples",
                                     description="Regenerate the scenario examples.")
    parser.add_argument("names", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--why", required=True,
                        help="why the figures change (stored with them; put it in the commit)")
    args = parser.parse_args(argv)
    for path in scenario_paths():
        if args.names and path.stem not in args.names:
            continue
        moved = write(path, args.why)
        print(f"{path.stem}: {'unchanged' if not moved else f'{len(moved)} figure(s) moved'}")
        for line in moved:
            print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
