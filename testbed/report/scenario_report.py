"""The report of one scenario: where the time goes, ETTR vs interval, a timeline, strategies.

:func:`build_report` writes ``index.html`` with four figures and their data as CSV:

* ``breakdown.png`` — where the wall time goes (useful compute, checkpoints, lost
  work, restarts, waiting), stacked, for the scenario and for each checkpoint
  interval of the study below;
* ``ettr_interval.png`` — ETTR against the checkpoint interval (simulated mean with
  95% CI at 0.25×…4× Daly's interval, the closed form where it holds), with the
  Young and Daly optima and the scenario's own interval marked;
* ``timeline.png`` — one replication (replication 0) over time: training kept and
  lost, checkpoints, failures, restarts and waits, from the SimPy event log;
* ``strategies.png`` — the oracle's best configuration of each parallel strategy.

The interval study re-runs the scenario with ``policy: fixed`` at each interval (for
a multi-level scenario: single-level checkpoints to its slowest level, so the plot
shows what the fast levels buy) with common random numbers, so the points differ
only by their interval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testbed.report import plots
from testbed.report.common import ReportFiles, pct, prepare_dir, write_csv, write_text
from testbed.report.html import Page
from testbed.sweep import simbridge
from testbed.units import format_duration

#: Intervals of the study, as multiples of Daly's optimum.
STUDY_MULTIPLES = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)
#: At most this many replications per study point (the scenario's own run uses all).
STUDY_MAX_REPLICATIONS = 100
#: Study intervals whose segment (interval + checkpoint) exceeds this many job MTBFs
#: are left out: each segment would need about e^this attempts, and a replication
#: would simulate that many failures for a point far from any useful optimum.
STUDY_MAX_SEGMENT_MTBFS = 2.5


def _oracle_rows(oracle: Any) -> list[dict]:
    """Best configuration per strategy from the many shapes the oracle's answer comes in."""
    if oracle is None:
        return []
    if isinstance(oracle, dict):
        if "result" in oracle and hasattr(oracle["result"], "best_per_strategy"):
            items = oracle["result"].best_per_strategy(oracle["global_batch"])
        elif "best_per_strategy" in oracle:
            items = oracle["best_per_strategy"]
        else:
            raise ValueError("oracle: expected testbed.cli.run.oracle_comparison() output or "
                             "a dict with 'best_per_strategy'")
    elif hasattr(oracle, "best_per_strategy"):
        raise ValueError("oracle: pass a dict with 'result' and 'global_batch'")
    else:
        items = list(oracle)
    rows = []
    for e in items:
        d = e if isinstance(e, dict) else e.to_dict()
        rows.append({k: d.get(k) for k in ("strategy", "gpus", "samples_per_s",
                                            "time_per_iteration_s", "bottleneck",
                                            "memory_per_gpu_bytes")})
    return rows


def _default_oracle(scenario):
    if scenario.model is None or scenario.system is None:
        return None
    # the same comparison `testbed run` prints (read-only use of the lead's helper)
    from testbed.cli.run import oracle_comparison
    return oracle_comparison(scenario)


def _study_scenario(scenario, spec, facts: dict, interval_s: float):
    """The scenario with single-level checkpoints every ``interval_s`` (see module doc)."""
    from testbed.scenario import scenario_from_dict

    data = scenario.model_dump(mode="json", exclude={"source", "lines"}, exclude_none=True)
    levels = facts["levels"]
    cost = levels[-1]["cost_s"] if len(levels) > 1 else facts["ckpt_cost_s"]
    load = levels[-1]["load_s"] if len(levels) > 1 else facts["load_s"]
    ck = {"policy": "fixed", "interval": interval_s, "cost": cost, "restart": load}
    if len(levels) <= 1 and scenario.checkpoint.persist:
        ck["persist"] = scenario.checkpoint.persist
    data["checkpoint"] = ck
    if len(levels) > 1:
        # causes name the levels that survive them; the study's single level is the
        # slowest one, named "checkpoint" by the simulator
        slowest = levels[-1]["name"]
        f = data.get("failures") or {}
        costs = list(f.get("category_costs", {}).values())
        for entry in (f["causes"] if isinstance(f.get("causes"), list) else []) + costs:
            if entry.get("survives") is not None:
                entry["survives"] = ["checkpoint"] if slowest in entry["survives"] else []
    if spec.step_s is not None and data.get("workload", {}).get("steps"):
        data["workload"] = {"steps": data["workload"]["steps"], "step_time": spec.step_s}
    return scenario_from_dict(data, source=scenario.source or "<report>", lines=scenario.lines)


def study_optima(facts: dict) -> tuple[float | None, float | None]:
    """Young's and Daly's intervals for the study's single level (the slowest one)."""
    levels = facts["levels"]
    if len(levels) > 1:
        return simbridge.optimum_intervals_s(levels[-1]["cost_s"], facts["job_mtbf_s"])
    return facts["young_interval_s"], facts["daly_interval_s"]


def study_intervals_s(facts: dict) -> list[tuple[float, float]]:
    """(multiple, interval) pairs of the study; empty without failures or checkpoints."""
    base = study_optima(facts)[1] or facts["interval_s"]
    if not base or not facts["job_mtbf_s"]:
        return []
    levels = facts["levels"]
    cost = levels[-1]["cost_s"] if len(levels) > 1 else facts["ckpt_cost_s"]
    return [(m, base * m) for m in STUDY_MULTIPLES
            if base * m + cost <= STUDY_MAX_SEGMENT_MTBFS * facts["job_mtbf_s"]]


def interval_study(scenario, spec, facts: dict, *, replications: int, seed: int,
                   progress=None) -> list[dict]:
    """ETTR and breakdown at each interval of :func:`study_intervals_s`."""
    out = []
    for m, tau in study_intervals_s(facts):
        sc = _study_scenario(scenario, spec, facts, tau)
        s = simbridge.resolve_spec(sc)
        rows = simbridge.run_replications(s, seed, replications)
        if progress is not None:
            progress(replications)
        cols = list(zip(*rows, strict=True))
        named = dict(zip(("rep",) + simbridge.OUTCOME_COLUMNS + ("run_s",), cols, strict=True))
        out.append({"multiple": m, "interval_s": s.plan.interval_s,
                    "ettr": simbridge.mean_ci95(named["ettr"]),
                    "wall_s": simbridge.mean_ci95(named["wall_s"]),
                    "breakdown_s": {c: sum(named[c]) / len(rows)
                                    for c in simbridge.BREAKDOWN_COLUMNS},
                    "analytic_wall_s": simbridge.analytic_wall_s(s)})
    return out


def _summary_breakdown(simulation: dict) -> dict:
    b = simulation["breakdown_s"]
    return {"useful_s": b["useful"], "checkpoint_s": b["checkpoint"], "lost_s": b["lost_work"],
            "restart_s": b["restart"], "waiting_s": b["waiting"]}


def build_report(out_dir: str | Path, *, scenario, oracle: Any = None,
                 simulation: dict | None = None, events: list[dict] | None = None,
                 study: bool = True, study_replications: int | None = None,
                 progress: bool = False) -> ReportFiles:
    """Write the scenario report (HTML + PNG + CSV) into ``out_dir`` and return the paths.

    ``scenario``: a validated :class:`testbed.scenario.Scenario` (or a path to one).
    ``oracle``: the strategy comparison — the dict of
    ``testbed.cli.run.oracle_comparison`` (``result`` + ``global_batch``), a dict with
    ``best_per_strategy`` (list of ``Estimate.to_dict()``), or a list of estimates;
    ``None`` computes it when the scenario names a model and system.
    ``simulation``: the simulator's summary (``testbed simulate --json``); ``None``
    simulates the scenario's replications. ``events``: replication 0's event log
    (records with ``t_s`` and ``event``); ``None`` runs it on the SimPy engine.
    ``study``: run the ETTR-vs-interval study (``study_replications`` per interval,
    default min(the scenario's, 100)). ``progress``: show a bar on stderr.
    Deterministic: the same scenario gives the same numbers (seeded streams).
    """
    from testbed.events import write_events
    from testbed.progress import Progress

    if isinstance(scenario, (str, Path)):
        from testbed.scenario import load_scenario
        scenario = load_scenario(scenario)
    out = prepare_dir(out_dir)
    sim_cfg = scenario.simulation
    page = Page(f"testbed report — {scenario.name}", scenario.description or "")
    pngs: list[Path] = []
    data: list[Path] = []

    if oracle is None:
        oracle = _default_oracle(scenario)
    oracle_rows = _oracle_rows(oracle)

    spec = facts = None
    study_rows: list[dict] = []
    if scenario.workload is not None:
        spec = simbridge.resolve_spec(scenario)
        facts = simbridge.spec_facts(spec)
        reps_study = study_replications or min(sim_cfg.replications, STUDY_MAX_REPLICATIONS)
        n_study = len(study_intervals_s(facts)) if study else 0
        can_study = n_study > 0
        total = (0 if simulation is not None else sim_cfg.replications) + reps_study * n_study
        with Progress(total, unit="rep", desc="report", enabled=progress) as bar:
            if simulation is None:
                simulation = simbridge.simulate_summary(spec, sim_cfg.replications, sim_cfg.seed,
                                                        sim_cfg.engine, progress=bar.update)
            if can_study:
                study_rows = interval_study(scenario, spec, facts, replications=reps_study,
                                            seed=sim_cfg.seed, progress=bar.update)
        if events is None:
            events = simbridge.event_log(spec, sim_cfg.seed, 0)

    # ---------------------------------------------------------------- summary
    if simulation is not None:
        page.heading("Summary")
        w, e = simulation["wall_time_s"], simulation["ettr"]
        an = simulation.get("analytical") or {}
        rows = [("wall time", format_duration(w["mean"]),
                 f"[{format_duration(w['ci95_low'])}, {format_duration(w['ci95_high'])}]",
                 format_duration(an["wall_time_s"]) if an.get("wall_time_s") else "-"),
                ("ETTR", pct(e["mean"]), f"[{pct(e['ci95_low'])}, {pct(e['ci95_high'])}]",
                 pct(an.get("ettr"))),
                ("failures per run", f"{simulation['failures']['mean']:.2f}",
                 f"[{simulation['failures']['ci95_low']:.2f}, "
                 f"{simulation['failures']['ci95_high']:.2f}]", "-")]
        page.para(f"{simulation['replications']} replications, seed {simulation['seed']}, "
                  f"{simulation['engine']} engine, checkpoint policy {simulation['policy']}"
                  + (f", interval {format_duration(simulation['checkpoint_interval_s'])}"
                     if simulation.get("checkpoint_interval_s") else "")
                  + (f", job MTBF {format_duration(simulation['job_mtbf_s'])}"
                     if simulation.get("job_mtbf_s") else "") + ".")
        page.table(["figure", "mean", "95% CI", "closed form"], rows)
        write_csv(out / "summary.csv", ["figure", "mean", "ci95_low", "ci95_high", "analytical"],
                  [("wall_time_s", w["mean"], w["ci95_low"], w["ci95_high"],
                    an.get("wall_time_s")),
                   ("ettr", e["mean"], e["ci95_low"], e["ci95_high"], an.get("ettr")),
                   ("failures", simulation["failures"]["mean"],
                    simulation["failures"]["ci95_low"], simulation["failures"]["ci95_high"],
                    None)])
        data.append(out / "summary.csv")

        # ------------------------------------------------------------ breakdown
        labels = ["scenario"] + [f"{r['multiple']:g}× Daly" for r in study_rows]
        bds = [_summary_breakdown(simulation)] + [r["breakdown_s"] for r in study_rows]
        plots.breakdown_bars(out / "breakdown.png", labels, bds,
                             "Where the time goes (mean per run)")
        pngs.append(out / "breakdown.png")
        write_csv(out / "breakdown.csv", ["run", *simbridge.BREAKDOWN_COLUMNS],
                  [(lab, *[b[c] for c in simbridge.BREAKDOWN_COLUMNS])
                   for lab, b in zip(labels, bds, strict=True)])
        data.append(out / "breakdown.csv")
        page.heading("Where the time goes")
        page.figure("breakdown.png", "Mean wall time per run split into useful compute, "
                    "checkpoints, work lost to failures, restarts and waiting for nodes: the "
                    "scenario and each interval of the study below.", "breakdown")

        # ------------------------------------------------------------ ETTR vs interval
        page.heading("ETTR against the checkpoint interval")
        pts = [{"interval_s": r["interval_s"], "ettr": r["ettr"]} for r in study_rows]
        if not pts and simulation.get("checkpoint_interval_s"):
            pts = [{"interval_s": simulation["checkpoint_interval_s"], "ettr": e}]
        if not pts:
            pts = [{"interval_s": facts["work_s"] if facts else 1.0, "ettr": e}]
        analytic = [(r["interval_s"], facts["work_s"] / r["analytic_wall_s"])
                    for r in study_rows if r["analytic_wall_s"]]
        multilevel = bool(facts and len(facts["levels"]) > 1)
        young_s, daly_s = study_optima(facts) if facts else (None, None)
        plots.ettr_vs_interval(
            out / "ettr_interval.png", pts, young_s=young_s, daly_s=daly_s,
            chosen_s=None if multilevel else simulation.get("checkpoint_interval_s"),
            analytic=analytic,
            reference_ettr=e["mean"] if multilevel else None,
            reference_label="the scenario's multi-level policy",
            title="ETTR vs checkpoint interval" + (" (single level, slowest storage)"
                                                   if multilevel else ""))
        pngs.append(out / "ettr_interval.png")
        write_csv(out / "ettr_interval.csv",
                  ["interval_s", "ettr_mean", "ettr_ci95_low", "ettr_ci95_high",
                   "wall_s_mean", "analytic_wall_s"],
                  [(r["interval_s"], r["ettr"]["mean"], r["ettr"]["ci95_low"],
                    r["ettr"]["ci95_high"], r["wall_s"]["mean"], r["analytic_wall_s"])
                   for r in study_rows])
        data.append(out / "ettr_interval.csv")
        cap = ("Simulated ETTR (useful compute / wall time) with 95% confidence intervals "
               "at multiples of Daly's interval, common random numbers")
        if daly_s:
            cap += (f"; Young √(2δM) = {format_duration(young_s)}, Daly "
                    f"= {format_duration(daly_s)}")
        if multilevel:
            cap += ("; single-level checkpoints to the slowest level, against the scenario's "
                    "multi-level policy (dashed line)")
        page.figure("ettr_interval.png", cap + ".", "ettr_interval")
        if not study_rows:
            page.para("No interval study: the scenario has no failures or no checkpoint cost, "
                      "so the interval does not matter; the point shows the scenario itself.")

    # ---------------------------------------------------------------- timeline
    if events:
        page.heading("Timeline of one replication")
        plots.timeline(out / "timeline.png", events,
                       f"Replication 0 of {scenario.name} (seed {sim_cfg.seed})")
        pngs.append(out / "timeline.png")
        write_text(out / "events.jsonl", _events_text(events, write_events))
        data.append(out / "events.jsonl")
        n_fail = sum(1 for ev in events if ev["event"] == "failure")
        n_ck = sum(1 for ev in events if ev["event"] == "checkpoint_commit")
        page.figure("timeline.png", f"Replication 0: {n_fail} failure(s), {n_ck} committed "
                    "checkpoint(s); training kept (green) and lost (red), checkpoints, "
                    "restarts and waits.", "timeline")

    # ---------------------------------------------------------------- strategies
    if oracle_rows:
        page.heading("Parallel strategies (oracle)")
        plots.strategies(out / "strategies.png", oracle_rows,
                         "Best configuration of each strategy")
        pngs.append(out / "strategies.png")
        write_csv(out / "strategies.csv", list(oracle_rows[0]),
                  [list(r.values()) for r in oracle_rows])
        data.append(out / "strategies.csv")
        page.figure("strategies.png", "Samples per second of each strategy's best "
                    "configuration, with its bottleneck, from the analytical oracle.",
                    "strategies")
        page.table(["strategy", "GPUs", "time/iteration", "samples/s", "bottleneck"],
                   [(r["strategy"], r["gpus"], format_duration(r["time_per_iteration_s"]),
                     f"{r['samples_per_s']:,.0f}", r["bottleneck"])
                    for r in sorted(oracle_rows, key=lambda r: -r["samples_per_s"])])

    if simulation is not None:
        write_text(out / "summary.json", json.dumps(simulation, indent=2, sort_keys=True,
                                                    default=str) + "\n")
        data.append(out / "summary.json")
    page.files([p.name for p in data])
    html = out / "index.html"
    write_text(html, page.render())
    return ReportFiles(out_dir=out, html=html, plots=tuple(pngs), data=tuple(data))


def _events_text(events, write_events) -> str:
    import io
    buf = io.StringIO()
    write_events(events, buf)
    return buf.getvalue()
