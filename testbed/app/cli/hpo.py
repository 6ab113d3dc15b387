"""``testbed hpo simulate|run|replay|report``: hyperparameter-optimisation schedules.

* ``simulate SCENARIO`` — the ``hpo:`` section on the simulated cluster;
* ``run SCENARIO`` — the same sweep for real (PyTorch on the digits data) on a local
  process pool or, started as ``mpiexec -n K python -m mpi4py.futures -m testbed hpo
  run … --executor mpi``, on K−1 MPI workers; state in ``--store`` (resumable);
* ``replay TRACE.jsonl`` — predict a recorded sweep's makespan from its measured times;
* ``report SCENARIO|TRACE -o DIR`` — Gantt chart, utilisation and best-so-far.

Every command has ``--json`` (at least ``makespan_s``, ``utilisation``,
``trials_completed``, ``trials_failed``, ``retries``) and a readable table.
"""

from __future__ import annotations

import click

from testbed.app.cli.common import emit_json, scenario_path, table
from testbed.units import format_duration


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def best_label(metric: str, mode: str) -> str:
    """``best val_loss (lowest)``: the one definition of best, with its metric named
    (see :mod:`testbed.app.hpo.best`)."""
    return f"best {metric} ({'lowest' if mode == 'min' else 'highest'} of any epoch)"


def _summary_rows(s: dict, metric: str = "value", mode: str = "min") -> list[tuple[str, str]]:
    rows = [("metric", f"{metric} ({mode})"),
            ("makespan", format_duration(s["makespan_s"])),
            ("utilisation", _pct(s["utilisation"])),
            ("idle slot-time", format_duration(s["idle_slot_s"])),
            ("lost to failures", format_duration(s["lost_to_failures_s"])),
            ("retries", str(s["retries"])),
            ("failures / preemptions", f"{s['failures']} / {s['preemptions']}"),
            ("trials", f"{s['trials_completed']} completed ({s['trials_stopped_early']} "
                       f"stopped early), {s['trials_failed']} failed, "
                       f"{s['trials_cancelled']} cancelled")]
    if s.get("best_trial") is not None:
        cfg = ", ".join(f"{k}={v}" for k, v in (s.get("best_config") or {}).items())
        rows.append((best_label(metric, mode),
                     f"{s['best_value']:.4g}: trial {s['best_trial']} ({cfg}) "
                     f"at {format_duration(s['best_t_s'])}"))
    return rows


def echo_summary(title: str, s: dict) -> None:
    """A titled table of an HPO summary (``to_dict()`` form, with ``metric`` and ``mode``)."""
    click.echo(title)
    click.echo(table(["figure", "value"],
                     _summary_rows(s, s.get("metric", "value"), s.get("mode", "min")),
                     align="ll"))


def plan_title(sc, plan) -> str:
    """One line: the search, the scheduler, the cluster and the seed of a planned sweep."""
    return (f"{sc.name}: {plan.spec.search} search, {plan.spec.scheduler} on "
            f"{plan.nodes} node(s) × {plan.gpus_per_node} GPU(s), "
            f"{plan.spec.on_failure} (max {plan.spec.max_retries}), seed {plan.seed}")


def _metric(path: str):
    """The scenario's ``hpo.metric`` (name and mode)."""
    from testbed.scenario.schema import load_scenario

    sc = load_scenario(path)
    assert sc.hpo is not None          # run_sweep refused a scenario without one
    return sc.hpo.metric


@click.group("hpo")
def hpo_group() -> None:
    """Hyperparameter-optimisation schedules: simulate, run for real, replay, report."""


@hpo_group.command("simulate")
@click.argument("scenario")
@click.option("--seed", type=int, help="Seed (default: hpo.seed, else simulation.seed).")
@click.option("--events", "events_path", help="Write the event log (canonical JSONL) here.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def simulate_cmd(scenario, seed, events_path, as_json) -> None:
    """Simulate SCENARIO's hpo: section."""
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.resolve import hpo_plan
    from testbed.io.write import check_writable_target, write_text
    from testbed.scenario.schema import check_overrides, load_scenario

    check_overrides(None, seed)
    if events_path is not None:
        check_writable_target(events_path, field="--events")
    sc = load_scenario(scenario_path(scenario))
    plan = hpo_plan(sc, seed=seed)
    run = simulate_hpo(plan)
    if events_path is not None:
        write_text(events_path, run.log_text(), field="--events")
    out = {"scenario": sc.name, "seed": plan.seed, "scheduler": plan.spec.scheduler,
           "search": plan.spec.search, "events_file": events_path,
           "metric": plan.spec.metric.name, "mode": plan.spec.metric.mode,
           **run.summary.to_dict()}
    if as_json:
        emit_json(out)
        return
    echo_summary(plan_title(sc, plan), out)
    if events_path:
        click.echo(f"event log: {events_path}")


@hpo_group.command("run")
@click.argument("scenario")
@click.option("--executor", type=click.Choice(["local", "mpi"]), default="local",
              show_default=True, help="Local process pool or MPI (mpi4py.futures).")
@click.option("--workers", type=int, help="Worker slots (default: the cluster's GPUs, "
              "at most 2 locally; under mpiexec the MPI size − 1).")
@click.option("--store", "store_path", default="hpo.db", show_default=True,
              help="SQLite state of the sweep (a rerun resumes it).")
@click.option("--trace", "trace_path", help="Write the schedule trace (JSONL) here.")
@click.option("--seed", type=int, help="Seed (default: hpo.seed, else simulation.seed).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def run_cmd(scenario, executor, workers, store_path, trace_path, seed, as_json) -> None:
    """Run SCENARIO's sweep for real (PyTorch CNN on scikit-learn's digits)."""
    from testbed.app.cli.common import require_framework
    from testbed.app.hpo.driver import run_sweep

    require_framework("torch", command="hpo run")
    path = str(scenario_path(scenario))
    res = run_sweep(path, executor=executor, workers=workers, store_path=store_path,
                    trace_path=trace_path, seed=seed)
    metric = _metric(path)
    out = {**res.to_dict(), "metric": metric.name, "mode": metric.mode}
    if as_json:
        emit_json(out)
        return
    echo_summary(f"{res.name}: ran {res.ran} attempt(s) on {res.workers} {executor} "
                  f"worker(s), {res.skipped} finished trial(s) kept from {store_path}"
                  f"{'' if not res.resumed else ' (resumed)'}", out)
    if trace_path:
        click.echo(f"trace: {trace_path}")


@hpo_group.command("replay")
@click.argument("trace")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def replay_cmd(trace, as_json) -> None:
    """Replay a recorded schedule trace in the simulator (measured per-trial times)."""
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.hpo.best import replayed_best
    from testbed.hpo.replay import replay_plan
    from testbed.hpo.trace import parse_trace, summarise
    from testbed.io.read import read_jsonl

    events = parse_trace(read_jsonl(trace), source=trace)
    plan = replay_plan(events, source=trace)
    mode = plan.spec.metric.mode
    measured = summarise(events, mode=mode)
    run = simulate_hpo(plan)
    replayed = replayed_best(run.summary, list(run.events), events, mode)
    busy_s = measured.makespan_s - measured.outage_s     # a lost driver's outage is not replayed
    err = (replayed.makespan_s - busy_s) / busy_s if busy_s > 0 else 0.0
    out = {"trace": trace, **replayed.to_dict(), "measured": measured.to_dict(),
           "metric": plan.spec.metric.name, "mode": mode,
           "measured_makespan_s": measured.makespan_s,
           "measured_outage_s": measured.outage_s, "makespan_error": err}
    if as_json:
        emit_json(out)
        return
    click.echo(f"replay of {trace}: {plan.spec.scheduler} on {plan.slots} slot(s)")
    m, r = measured.to_dict(), replayed.to_dict()
    name = plan.spec.metric.name
    click.echo(table(["figure", "measured", "replayed"],
                     [(k, a, b) for (k, a), (_, b) in zip(_summary_rows(m, name, mode),
                                                          _summary_rows(r, name, mode),
                                                          strict=False)], align="lll"))
    if measured.outage_s > 0:
        click.echo(f"driver outage: {format_duration(measured.outage_s)} over "
                   f"{measured.resumes} resume(s), not replayed")
    click.echo(f"makespan error: {100 * err:+.2f}% (against the makespan less the outage)")


@hpo_group.command("report")
@click.argument("source")
@click.option("-o", "--output", "out_dir", default="report/hpo", show_default=True,
              help="Folder for index.html, PNG plots and CSV.")
@click.option("--seed", type=int, help="Seed for a scenario (default: the scenario's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def report_cmd(source, out_dir, seed, as_json) -> None:
    """Report of a scenario's simulated sweep or of a recorded trace (.jsonl)."""
    from testbed.app.report.hpo_report import write_hpo_report
    if not source.endswith(".jsonl"):
        source = str(scenario_path(source))
    files = write_hpo_report(source, out_dir, seed=seed)
    if as_json:
        emit_json(files.to_dict())
        return
    click.echo(f"report: {files.html} ({len(files.plots)} plots, {len(files.data)} CSV files)")
