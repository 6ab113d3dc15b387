"""``testbed simulate SCENARIO``: failures and checkpoint-restart of a whole training run.

Replicates the scenario's job R times (fast exact path by default, or the
step-by-step SimPy engine) and prints the mean wall time, ETTR and where the time
went, each with a 95% confidence interval and the analytical estimate next to it.
``--events FILE`` writes replication 0's event log (SimPy engine, canonical JSONL).
"""

from __future__ import annotations

import io
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from testbed.app.cli.common import emit_json, table
from testbed.units import format_duration

if TYPE_CHECKING:      # the simulator, the resolver and numpy load when a run starts
    from testbed.outcomes import SimSummary
    from testbed.stats import MeanCI


def run_simulation(scenario, replications: int | None = None, seed: int | None = None,
                   engine: str | None = None, events_path: str | None = None,
                   progress: bool = False) -> SimSummary:
    """Resolve and simulate a loaded scenario; optionally write replication 0's event log
    (its target is checked before anything runs)."""
    from simulators.run import event_log, simulate
    from testbed.app.progress import Progress
    from testbed.app.resolve import resolve
    from testbed.app.resolve.runaway import refuse_stepwise
    from testbed.events import write_events
    from testbed.io.write import check_writable_target, write_text

    if events_path is not None:
        check_writable_target(events_path, field="--events")
    spec = resolve(scenario)
    refuse_stepwise(spec, engine=engine or scenario.simulation.engine,
                    events=events_path is not None, option="drop --events")
    target = spec.target if replications is None else None     # adaptive replications
    reps = None if target is not None else (replications or scenario.simulation.replications)
    seed = scenario.simulation.seed if seed is None else seed
    engine = engine or scenario.simulation.engine
    total = target.max_reps if target is not None else (reps or 0)
    with Progress(total, unit="rep", desc=scenario.name, enabled=progress) as bar:
        summary = simulate(spec, reps, seed, engine, progress=bar.update)
    if events_path is not None:
        buf = io.StringIO()
        write_events(event_log(spec, seed, 0), buf)
        write_text(events_path, buf.getvalue(), field="--events")
        summary = replace(summary, events_file=str(events_path))
    return summary


def _ci(m: MeanCI, fmt) -> tuple[str, str]:
    return fmt(m.mean), f"[{fmt(m.ci95_low)}, {fmt(m.ci95_high)}]"


#: Cluster-operation figures of the summary table, in AIReSim's vocabulary (key, label).
OPS_ROWS = (("failures_hardware", "failures: hardware"),
            ("failures_job_induced", "failures: job-induced"),
            ("failures_systematic", "failures: systematic (bad nodes)"),
            ("failures_burst", "failures: burst followers"),
            ("failures_idle", "failures of nodes not in use"),
            ("planned_stops", "planned stops (maintenance)"),
            ("missed_diagnoses", "diagnosis: missed"), ("misdiagnoses", "diagnosis: wrong node"),
            ("repairs_automatic", "repairs: automatic"), ("repairs_manual", "repairs: manual"),
            ("repairs_successful", "repairs: successful"), ("repairs_failed", "repairs: failed"),
            ("bad_nodes_cured", "bad nodes cured"), ("retirements", "retirements"),
            ("swaps", "standby swaps"), ("host_selections", "host selections"),
            ("preemptions", "preemptions (nodes)"), ("stalls", "stalls"))
OPS_TIMES = (("stall_s", "stall time"), ("host_selection_s", "host-selection time"),
             ("swap_s", "swap time"), ("preemption_s", "preemption time"),
             ("maintenance_s", "maintenance windows"))


def _semantics_line(s: SimSummary) -> str | None:
    sem = s.semantics
    if sem is None or not sem.failure_rate_per_h:
        return None
    bits = [f"failures: {sem.failure_rate_per_h:.4g}/h while the job runs "
            f"({sem.start} start: this rate from t = 0)"]
    if sem.exposure == "running":
        bits.append("none while it restarts or waits (exposure: running)")
    else:
        bits.append(f"{100 * sem.hardware_share:.0f}% of that (hardware causes) while it "
                    "restarts")
        bits.append("nodes not in use: " + ("clocks stopped" if not sem.idle_rate_factor else
                                            f"{sem.idle_rate_factor:g} x that"))
    if not sem.lose_work:
        bits.append("no work lost")
    return "  " + "; ".join(bits)


def print_summary(s: SimSummary) -> None:
    """Readable report of a simulation summary."""
    st, an = s.stats, s.analytical
    how = "" if s.stopped == "fixed" or s.target_ci is None else (
        f" (adaptive: {s.stopped}, {s.target_ci['figure']} within "
        f"+/-{100 * s.target_ci['relative_half_width']:.2g}%)")
    click.echo(f"\nSimulation: {st.replications} replication(s){how}, seed {s.seed}, "
               f"{s.engine} engine, policy {s.policy}")
    bits = [f"work {format_duration(s.work_s)}", f"{s.nodes} node(s)"]
    if s.job_mtbf_s:
        bits.append(f"job MTBF {format_duration(s.job_mtbf_s)}")
    if s.checkpoint_interval_s:
        bits.append(f"checkpoint every {format_duration(s.checkpoint_interval_s)} of compute, "
                    f"cost {format_duration(s.checkpoint_cost_s)}")
    bits.append(f"restart {format_duration(s.restart_s)}")
    click.echo("  " + ", ".join(bits))
    line = _semantics_line(s)
    if line:
        click.echo(line)
    pct = lambda v: f"{100 * v:.2f}%"  # noqa: E731
    rows = [("wall time", *_ci(st.wall_time_s, format_duration),
             format_duration(an.wall_time_s) if an.wall_time_s else "-"),
            ("ETTR", *_ci(st.ettr, pct), pct(an.ettr) if an.ettr else "-")]
    if st.ettr_per_run is not None:
        rows.append(("ETTR per run (mean)", *_ci(st.ettr_per_run, pct), "-"))
    rows.append(("failures", *_ci(st.failures, lambda v: f"{v:.2f}"), "-"))
    click.echo(table(["figure", "estimate", "95% CI", "analytical"], rows, align="lrrr"))
    click.echo("  ETTR = useful compute / wall time, estimated as the ratio of sums "
               "(Σ useful / Σ wall over replications, delta-method Student-t 95% CI); "
               "analytical: work / E[wall]; per run: the mean of per-replication ratios "
               "(AIReSim's ETR)")
    b = st.breakdown_s.to_dict()
    total = sum(b.values()) or 1.0
    click.echo(table(["where the time went", "mean", "share"],
                     [(k.removesuffix("_s").replace("_", " "), format_duration(v),
                       f"{100 * v / total:.2f}%") for k, v in b.items()], align="lrr"))
    if len(st.failures_by_cause) > 1:
        top = sorted(st.failures_by_cause.items(), key=lambda kv: -kv[1])
        click.echo(table(["failures by cause", "mean per run"],
                         [(k, f"{v:.2f}") for k, v in top], align="lr"))
    _print_ops(st)
    if s.events_file:
        click.echo(f"event log of replication 0: {s.events_file}")


def _print_ops(st) -> None:
    """Cluster operations, in AIReSim's vocabulary (rows that are not all zero)."""
    ops = st.ops or {}
    rows = [(label, f"{ops[k]:.2f}") for k, label in OPS_ROWS if ops.get(k)]
    rows += [(label, format_duration(ops[k])) for k, label in OPS_TIMES if ops.get(k)]
    if st.depleted_runs:
        rows.append(("depleted runs (ended unfinished)", f"{st.depleted_runs}"))
    if rows:
        click.echo(table(["cluster operations", "mean per run"], rows, align="lr"))


def _engine_name(ctx: click.Context, param: click.Parameter, value: str | None
                 ) -> str | None:
    """``--engine``, checked against the simulator's engines when given (their names
    load with the simulator, not with ``--help``)."""
    if value is None:
        return None
    from testbed.app.cli.common import Names
    from testbed.resilience.spec import ENGINES
    return Names(ENGINES, "engine").convert(value, param, ctx)


@click.command("simulate")
@click.argument("scenario", required=False)
@click.option("--replications", "-r", type=int, help="Replications (default: the scenario's).")
@click.option("--seed", type=int, help="Run seed (default: the scenario's).")
@click.option("--engine", callback=_engine_name,
              help="fast exact path (default) or the step-by-step SimPy engine (simpy).")
@click.option("--events", "events_path", help="Write replication 0's event log (JSONL) here.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option("--replay-run", "replay_run", type=click.Path(dir_okay=False),
              help="Replay a supervised run's timeline instead (testbed.app.cli.replay).")
@click.option("--system", help="With --replay-run: the calibrated profile.")
def simulate_cmd(scenario, replications, seed, engine, events_path, as_json, quiet,
                 replay_run, system) -> None:
    """Simulate failures and checkpoint-restart of a training run described by SCENARIO
    (or, with --replay-run TIMELINE --system PROFILE, replay a real fault-injected run)."""
    if replay_run:
        from testbed.app.cli.replay import run_replay
        return run_replay(replay_run, system, as_json)
    if scenario is None:
        raise click.UsageError("missing argument SCENARIO (or --replay-run TIMELINE)")
    from testbed.app.progress import wanted
    from testbed.scenario.schema import check_overrides, load_scenario

    check_overrides(replications, seed)
    sc = load_scenario(scenario)
    summary = run_simulation(sc, replications, seed, engine, events_path,
                             progress=wanted(quiet, as_json))
    if as_json:
        emit_json(summary)
        return
    click.echo(f"scenario {sc.name}" + (f": {sc.description}" if sc.description else ""))
    print_summary(summary)
