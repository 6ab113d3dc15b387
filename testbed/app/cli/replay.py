"""``testbed simulate --replay-run TIMELINE.jsonl --system PROFILE``: a real
fault-injected run replayed in the simulator with a calibrated profile.

TIMELINE is the timeline a supervised run wrote (``testbed real-run train
--timeline``), or a record file holding a ``supervised_run`` record. The run's kills,
checkpoint interval and steps become a trace-replay spec
(:mod:`testbed.calibration.replay`), priced with the profile's fitted compute, storage
and restart costs, and the fast engine runs it; predicted and measured wall time, lost
steps, checkpoint time and restart time are printed side by side.
"""

from __future__ import annotations

import click

from testbed.app.cli.common import emit_json, table
from testbed.calibration.metrics import accuracy
from testbed.errors import ScenarioError
from testbed.units import format_duration


def _plan(path: str):
    """The run plan of a timeline (every event validated) or of the first
    ``supervised_run`` record of a record file."""
    from testbed.calibration.replay import (
        check_replay_size,
        plan_of_record,
        read_timeline,
        run_plan,
    )
    from testbed.io.read import read_jsonl
    from testbed.measurements import SupervisedRun, parse_record
    lines = read_jsonl(path)
    if not lines:
        raise ScenarioError("empty timeline", source=path)
    _, first = lines[0]
    if isinstance(first, dict) and "schema_version" in first:
        for line, value in lines:
            rec = parse_record(value, source=path, line=line)
            if isinstance(rec, SupervisedRun):
                return check_replay_size(plan_of_record(rec), path, line), rec.run_id or path
        raise ScenarioError("no supervised_run record in this file", source=path)
    return run_plan(read_timeline(path), path), path


def replay(timeline: str, system: str) -> dict:
    """Replay one run; the side-by-side figures as a dict."""
    from simulators.fast import run_fast
    from testbed.calibration.profile import load_calibrated
    from testbed.calibration.replay import kill_times, predicted_of, replay_costs, replay_spec
    plan, name = _plan(timeline)
    prof = load_calibrated(system)
    if prof.fit is None:
        raise ScenarioError("the profile has no calibration.records_fit (calibrate it from "
                            "records first)", source=prof.path, field="calibration")
    costs = replay_costs(prof.system, plan)
    schedule = kill_times(plan, costs)
    spec = replay_spec(plan, costs, schedule, name)
    rep = run_fast(spec, 0, 0)
    pred = predicted_of(rep.wall_s, rep.checkpoint_s, rep.restart_s, schedule, costs,
                        rep.failures)
    meas = plan.measured
    out = {"run": name, "profile": prof.system.name, "steps": plan.steps,
           "checkpoint_every": plan.checkpoint_every,
           "kills": [k.model_dump(exclude_none=True) for k in plan.kills],
           "costs": costs.to_dict(), "predicted": pred.to_dict(),
           "measured": meas.to_dict() if meas else None,
           "kill_times_s": list(schedule.kill_times_s),
           "schedule_wall_s": schedule.total_s}
    # the wall time's parts: useful (every step once), checkpoint writes, lost (steps
    # re-done, aborted writes), restarts, the first process's start-up and the last
    # one's end
    useful = plan.steps * costs.step_s
    out["predicted_split_s"] = {
        "startup_s": schedule.start_s, "useful_s": useful, "checkpoint_s": pred.checkpoint_s,
        "lost_s": max(pred.wall_time_s - schedule.start_s - schedule.end_s - useful
                      - pred.checkpoint_s - pred.restart_s, 0.0),
        "restart_s": pred.restart_s, "end_s": schedule.end_s}
    if meas is not None:
        out["measured_split_s"] = {
            "checkpoint_s": meas.checkpoint_s, "restart_s": meas.restart_s,
            "startup_s": meas.start_s, "end_s": meas.end_s,
            "startup_useful_lost_s": max(meas.wall_time_s - meas.checkpoint_s
                                         - meas.restart_s - (meas.end_s or 0.0), 0.0)}
        out["wall_time_accuracy"] = round(accuracy(pred.wall_time_s, meas.wall_time_s), 4)
    return out


def run_replay(timeline: str, system: str | None, as_json: bool) -> None:
    if not system:
        raise ScenarioError("--replay-run needs --system PROFILE (a calibrated profile)",
                            field="--system")
    out = replay(timeline, system)
    if as_json:
        emit_json(out)
        return
    meas, pred = out["measured"] or {}, out["predicted"]
    rows = []
    for key, fmt in (("wall_time_s", format_duration), ("lost_steps", lambda v: f"{v:.1f}"),
                     ("checkpoint_s", format_duration), ("restart_s", format_duration),
                     ("kills", str)):
        m = meas.get(key)
        rows.append((key.removesuffix("_s").replace("_", " "), fmt(pred[key]),
                     "-" if m is None else fmt(m)))
    click.echo(f"replay of {out['run']} ({out['steps']} steps, checkpoint every "
               f"{out['checkpoint_every']}, {len(out['kills'])} kill(s)) on {out['profile']}")
    split, msplit = out["predicted_split_s"], out.get("measured_split_s") or {}
    for key in ("startup_s", "useful_s", "lost_s", "end_s"):
        m = msplit.get(key)
        rows.append((f"  {key.removesuffix('_s').replace('startup', 'start-up')} time",
                     format_duration(split[key]), "-" if m is None else format_duration(m)))
    if msplit:
        rows.append(("  start-up + useful + lost",
                     format_duration(split["startup_s"] + split["useful_s"] + split["lost_s"]),
                     format_duration(msplit["startup_useful_lost_s"])))
    click.echo(table(["figure", "predicted", "measured"], rows, align="lrr"))
    if "wall_time_accuracy" in out:
        click.echo(f"wall-time accuracy min/max: {out['wall_time_accuracy']:.3f}")
    c = out["costs"]
    click.echo(f"costs: step {c['step_s'] * 1e3:.3f} ms, checkpoint {c['checkpoint_s'] * 1e3:.2f} ms,"
               f" load {c['load_s'] * 1e3:.2f} ms, restart {c['restart_s']:.2f} s, start-up "
               f"{c['startup_s']:.2f} s, end {c['end_s']:.2f} s ({c['basis']})")
