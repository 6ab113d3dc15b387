"""The report of one scenario: where the time goes, ETTR vs interval, a timeline, strategies.

:func:`build_report` presents a :class:`~testbed.app.sweep.studies.ScenarioRun` — it
computes nothing. It writes ``index.html`` with these figures and their data as CSV:

* ``breakdown.png`` — where the wall time goes (useful compute, checkpoints, lost
  work, restarts, waiting), stacked, for the scenario and each interval of the study;
* ``ettr_interval.png`` — ETTR against the checkpoint interval (the study's points
  with 95% CIs, the closed form where it holds) with the Young and Daly optima and
  the scenario's own interval marked; the 1× point is the scenario itself;
* ``interval_paired.png`` — each interval against the study's best, replication by
  replication: the points share their random numbers, so the noise they share cancels
  in the paired intervals, which show which intervals are worse beyond doubt;
* ``timeline.png`` — replication 0 over time, from the SimPy event log;
* ``strategies.png`` — the oracle's best configuration of each parallel strategy.
"""

from __future__ import annotations

import io
from pathlib import Path

from testbed.app.report import plots
from testbed.app.report.common import ReportFiles, paired_ettr_difference, pct, report_folder
from testbed.app.report.html import Page
from testbed.app.resolve import OracleComparison
from testbed.app.sweep.studies import IntervalStudy, ScenarioRun
from testbed.events import write_events
from testbed.io.write import write_csv, write_json, write_text
from testbed.outcomes import BREAKDOWN_KEYS, SimSummary
from testbed.units import format_duration


class _Report:
    """The page being built and the files written so far."""

    def __init__(self, out: Path, page: Page) -> None:
        self.out, self.page = out, page
        self.pngs: list[Path] = []
        self.data: list[Path] = []

    def csv(self, name: str, header, rows) -> None:
        self.data.append(write_csv(self.out / name, header, rows))

    def plot(self, name: str) -> Path:
        path = self.out / name
        self.pngs.append(path)
        return path


def _ci(m, fmt) -> str:
    return f"[{fmt(m.ci95_low)}, {fmt(m.ci95_high)}]"


def _summary(r: _Report, s: SimSummary) -> None:
    st, an = s.stats, s.analytical
    r.page.heading("Summary")
    r.page.para(f"{st.replications} replications, seed {s.seed}, {s.engine} engine, checkpoint "
                f"policy {s.policy}"
                + (f", interval {format_duration(s.checkpoint_interval_s)}"
                   if s.checkpoint_interval_s else "")
                + (f", job MTBF {format_duration(s.job_mtbf_s)}" if s.job_mtbf_s else "") + ".")
    r.page.table(["figure", "mean", "95% CI", "closed form"], [
        ("wall time", format_duration(st.wall_time_s.mean), _ci(st.wall_time_s, format_duration),
         format_duration(an.wall_time_s) if an.wall_time_s else "-"),
        ("ETTR (Σ useful / Σ wall)", pct(st.ettr.mean), _ci(st.ettr, pct), pct(an.ettr)),
        *([("ETTR per run (mean of ratios)", pct(st.ettr_per_run.mean),
            _ci(st.ettr_per_run, pct), "-")] if st.ettr_per_run is not None else []),
        ("failures per run", f"{st.failures.mean:.2f}",
         _ci(st.failures, lambda v: f"{v:.2f}"), "-")])
    r.csv("summary.csv", ["figure", "mean", "ci95_low", "ci95_high", "analytical"], [
        ("wall_time_s", st.wall_time_s.mean, st.wall_time_s.ci95_low, st.wall_time_s.ci95_high,
         an.wall_time_s),
        ("ettr", st.ettr.mean, st.ettr.ci95_low, st.ettr.ci95_high, an.ettr),
        ("failures", st.failures.mean, st.failures.ci95_low, st.failures.ci95_high, None)])


def _breakdown(r: _Report, s: SimSummary, study: IntervalStudy | None) -> None:
    points = study.points if study else ()
    labels = ["scenario"] + [f"{p.multiple:g}×" for p in points]
    bds = [s.stats.breakdown_s.to_dict()] + [p.stats.breakdown_s.to_dict() for p in points]
    plots.breakdown_bars(r.plot("breakdown.png"), labels, bds,
                         "Where the time goes (mean per run)")
    r.csv("breakdown.csv", ["run", *BREAKDOWN_KEYS],
          [(lab, *[b[k] for k in BREAKDOWN_KEYS]) for lab, b in zip(labels, bds, strict=True)])
    share = sum(plots.overhead_shares(bds[0]).values())
    r.page.heading("Where the time goes")
    r.page.figure("breakdown.png", "Mean wall time per run split into useful compute, "
                  "checkpoints, work lost to failures, restarts and waiting for nodes: the "
                  "scenario and each interval of the study below (multiples of "
                  + (study.base if study else "the interval") + "). Top: the whole run; "
                  "bottom: the overhead alone, in % of the useful compute, on its own axis "
                  f"(the scenario's: {100 * share:.2f}% of useful compute).", "breakdown")


def _interval_plot(r: _Report, s: SimSummary, study: IntervalStudy | None) -> None:
    r.page.heading("ETTR against the checkpoint interval")
    if study is None or not study.points:
        pts = [{"interval_s": s.checkpoint_interval_s or s.work_s, "ettr": s.stats.ettr.to_dict()}]
        analytic = []
    else:
        pts = [{"interval_s": p.interval_s, "ettr": p.stats.ettr.to_dict()} for p in study.points]
        analytic = [(p.interval_s, s.work_s / p.analytic_wall_s) for p in study.points
                    if p.analytic_wall_s]
    multi = bool(study and study.single_level)
    plots.ettr_vs_interval(
        r.plot("ettr_interval.png"), pts,
        young_s=study.young_interval_s if study else None,
        daly_s=study.daly_interval_s if study else None,
        chosen_s=None if multi else s.checkpoint_interval_s, analytic=analytic,
        reference_ettr=s.stats.ettr.mean if multi else None,
        reference_label="the scenario's multi-level policy",
        title="ETTR vs checkpoint interval" + (" (single level, slowest storage)"
                                               if multi else ""))
    rows = [(p.multiple, p.interval_s, p.stats.ettr.mean, p.stats.ettr.ci95_low,
             p.stats.ettr.ci95_high, p.stats.wall_time_s.mean, p.analytic_wall_s)
            for p in (study.points if study else ())]
    r.csv("ettr_interval.csv", ["multiple", "interval_s", "ettr_mean", "ettr_ci95_low",
                                "ettr_ci95_high", "wall_s_mean", "analytic_wall_s"], rows)
    r.page.figure("ettr_interval.png", _interval_caption(study), "ettr_interval")
    if not study or not study.points:
        r.page.para("No interval study: the scenario has no failures or no checkpoint cost, "
                    "so the interval does not matter; the point shows the scenario itself.")


def _interval_paired(r: _Report, study: IntervalStudy | None) -> None:
    """Each interval of the study against its best one, pair by pair (module doc)."""
    points = [p for p in (study.points if study else ()) if p.replications_useful_wall_s]
    if study is None or len(points) < 2 or study.replications < 2:
        return
    best = max(points, key=lambda p: (p.stats.ettr.mean, -p.multiple))
    rows = [(p, paired_ettr_difference(list(p.replications_useful_wall_s),
                                       list(best.replications_useful_wall_s)))
            for p in points if p is not best]
    plots.paired_differences(
        r.plot("interval_paired.png"), [f"{p.multiple:g}× ({format_duration(p.interval_s)})"
                                        for p, _ in rows],
        [(d.difference, d.ci95_low, d.ci95_high) for _, d in rows],
        f"the best interval ({best.multiple:g}×)",
        "Each interval against the best, on the same random numbers")
    r.csv("interval_paired.csv", ["multiple", "interval_s", "reference_multiple",
                                  "ettr_difference", "ci95_low", "ci95_high", "pairs",
                                  "point_ci95_halfwidth"],
          [(p.multiple, p.interval_s, best.multiple, d.difference, d.ci95_low, d.ci95_high,
            d.pairs, (p.stats.ettr.ci95_high - p.stats.ettr.ci95_low) / 2) for p, d in rows])
    worse = [p for p, d in rows if d.ci95_high < 0]
    tied = [p for p, d in rows if d.ci95_high >= 0]
    paired_half = sorted((d.ci95_high - d.ci95_low) / 2 for _, d in rows)
    point_half = sorted((p.stats.ettr.ci95_high - p.stats.ettr.ci95_low) / 2 for p in points)
    paired_mid, point_mid = paired_half[len(paired_half) // 2], point_half[len(point_half) // 2]
    shared = ("the noise the points share cancels" if paired_mid < point_mid else
              "little noise is shared (each interval's runs diverge after the first failure)")
    r.page.heading("Which intervals are worse (paired differences)")
    r.page.figure("interval_paired.png",
                  f"ETTR of each interval minus that of the best one ({best.multiple:g}×, "
                  f"{format_duration(best.interval_s)}), replication by replication on the "
                  f"same random numbers, with the paired 95% CI (red: worse beyond doubt). "
                  f"Here {shared}: median half-width {100 * paired_mid:.3f} pp paired "
                  f"against {100 * point_mid:.3f} pp for a point's own interval; a paired "
                  "interval that excludes 0 settles the comparison even where the points' "
                  "own intervals overlap.",
                  "interval_paired")
    r.page.para(f"{len(worse)} of {len(rows)} intervals are worse than {best.multiple:g}× "
                "beyond doubt" + (f"; not distinguishable from it: "
                                  f"{', '.join(f'{p.multiple:g}×' for p in tied)}"
                                  if tied else "") + ".")


def _interval_caption(study: IntervalStudy | None) -> str:
    if study is None:
        return "The scenario's ETTR."
    cap = (f"Simulated ETTR (Σ useful / Σ wall, delta-method 95% confidence "
           f"intervals) at multiples of {study.base} ({format_duration(study.base_interval_s)}),"
           f" {study.replications} replications per point, common random numbers (seed "
           f"{study.seed}); the 1× point is the scenario itself")
    if study.daly_interval_s and study.young_interval_s is not None:
        cap += (f"; Young √(2δM) = {format_duration(study.young_interval_s)}, Daly = "
                f"{format_duration(study.daly_interval_s)}")
    if study.single_level:
        cap += ("; single-level checkpoints to the slowest level, against the scenario's "
                "multi-level policy (dashed line)")
    if study.left_out:
        cap += (f"; multiples {', '.join(f'{m:g}×' for m in study.left_out)} left out: their "
                "segments exceed 2.5 job MTBFs and would hardly ever finish")
    return cap + "."


def _checkpoint_cost(r: _Report, terms: dict) -> None:
    keys = ("device_to_host_s", "serialize_s", "transfer_s", "metadata_s", "fsync_s")
    r.page.heading("What a checkpoint costs")
    plots.checkpoint_terms(r.plot("checkpoint_cost.png"), terms,
                           f"One checkpoint: {format_duration(terms['write_s'])} to write, "
                           f"{format_duration(terms['read_s'])} to read")
    r.page.figure("checkpoint_cost.png",
                  f"The blocking checkpoint cost term by term: {terms['writers']} writer(s) on "
                  f"{terms['writer_nodes']} node(s) to the {terms['tier']} tier, "
                  f"{terms['bytes_per_writer'] / 2**20:,.1f} MiB each (storage physics of the "
                  "system profile; each term is calibratable).", "checkpoint_cost")
    r.csv("checkpoint_cost.csv", ["term", "seconds"],
          [(k, terms[k]) for k in (*keys, "write_s", "read_transfer_s", "read_s")])


def _input_precision(r: _Report, c) -> None:
    rows = []
    for side in (c.scenario, c.baseline):
        other = max(0.0, side.time_per_iteration_s - side.compute_s - side.io_s)
        rows.append({"label": side.input_precision, "compute_s": side.compute_s,
                     "io_s": side.io_s, "other_s": other})
    r.page.heading("Input precision")
    plots.input_precision_bars(r.plot("input_precision.png"), rows,
                               f"Inputs stored at {c.scenario.input_precision} vs "
                               f"{c.baseline.input_precision}")
    r.page.figure("input_precision.png", "Time per iteration (oracle) with the scenario's "
                  "input precision and with fp32 inputs: fewer bytes per sample shrink the "
                  "dataset, its staging and the per-iteration read.", "input_precision")
    header = ["input precision", "bytes/sample", "dataset bytes", "time/iteration",
              "exposed input I/O", "bottleneck", "simulated wall time"]
    table = [(s.input_precision, f"{s.input_bytes_per_sample:,.0f}", f"{s.dataset_bytes:,.0f}",
              format_duration(s.time_per_iteration_s), format_duration(s.io_s), s.bottleneck,
              format_duration(s.wall_time_s)) for s in (c.scenario, c.baseline)]
    r.page.table(header, table)
    r.page.para(f"Storing inputs at {c.scenario.input_precision} makes the whole run "
                f"{c.speedup:.2f}× as fast as fp32 inputs (same seed and replications).")
    r.csv("input_precision.csv", ["input_precision", "input_bytes_per_sample", "dataset_bytes",
                                  "time_per_iteration_s", "io_s", "compute_s", "bottleneck",
                                  "wall_time_s", "ettr"],
          [tuple(s.to_dict().values()) for s in (c.scenario, c.baseline)])


def _timeline(r: _Report, run: ScenarioRun) -> None:
    events = list(run.events)
    r.page.heading("Timeline of one replication")
    seed = run.summary.seed if run.summary else run.scenario.simulation.seed
    plots.timeline(r.plot("timeline.png"), events,
                   f"Replication 0 of {run.scenario.name} (seed {seed})")
    buf = io.StringIO()
    write_events(events, buf)
    r.data.append(write_text(r.out / "events.jsonl", buf.getvalue()))
    n_fail = sum(1 for ev in events if ev["event"] == "failure")
    n_ck = sum(1 for ev in events if ev["event"] == "checkpoint_commit")
    end = max((float(ev["t_s"]) for ev in events), default=0.0)
    binned = n_ck > plots.TIMELINE_BINS // 2
    r.page.figure("timeline.png", f"Replication 0: {n_fail} failure(s), {n_ck} committed "
                  "checkpoint(s); training kept (green) and lost (red), restarts and waits; "
                  + (f"checkpoints counted per {format_duration(end / plots.TIMELINE_BINS)} "
                     "(bar height: commits in that span)" if binned
                     else "each checkpoint where it was written") + ".", "timeline")


def infeasible_strategies(comparison: OracleComparison) -> list[tuple[str, int, str]]:
    """(strategy, GPUs, reason) of each strategy with no feasible configuration at the
    comparison's batch: the reason at the largest GPU count tried (the configuration
    closest to fitting), not one of the degenerate points the sweep skips."""
    feasible = {e.strategy for e in comparison.best_per_strategy}
    worst: dict[str, tuple[int, str]] = {}
    for e in comparison.result.infeasible:
        if e.strategy in feasible or e.global_batch != comparison.global_batch:
            continue
        reason = e.reason or "infeasible"
        skipped = reason.startswith("skipped")
        have = worst.get(e.strategy)
        if have is None or (have[1].startswith("skipped") and not skipped) or \
                (e.gpus > have[0] and not skipped):
            worst[e.strategy] = (e.gpus, reason)
    return [(s, g, why) for s, (g, why) in sorted(worst.items())]


def _strategies(r: _Report, comparison: OracleComparison) -> None:
    keys = ("strategy", "gpus", "samples_per_s", "time_per_iteration_s", "bottleneck",
            "memory_per_gpu_bytes")
    rows = [{k: getattr(e, k) for k in keys} for e in comparison.best_per_strategy]
    bad = infeasible_strategies(comparison)
    if not rows and not bad:
        return
    r.page.heading("Parallel strategies (oracle)")
    plots.strategies(r.plot("strategies.png"), rows, "Best configuration of each strategy",
                     infeasible=bad)
    r.csv("strategies.csv", [*keys, "infeasible_reason"],
          [[row[k] for k in keys] + [""] for row in rows]
          + [[s, g, None, None, None, None, why] for s, g, why in bad])
    r.page.figure("strategies.png", "Samples per second of each strategy's best "
                  "configuration, with its bottleneck, from the analytical oracle"
                  + (f"; {len(bad)} strategies have no configuration that fits, each with "
                     "its reason" if bad else "") + ".", "strategies")
    r.page.table(["strategy", "GPUs", "time/iteration", "samples/s", "bottleneck"],
                 [(x["strategy"], x["gpus"], format_duration(x["time_per_iteration_s"]),
                   f"{x['samples_per_s']:,.0f}", x["bottleneck"])
                  for x in sorted(rows, key=lambda x: -x["samples_per_s"])])
    if bad:
        r.page.heading("Strategies with no feasible configuration")
        r.page.table(["strategy", "GPUs", "why"], [(s, g, why) for s, g, why in bad])


def build_report(out_dir: str | Path, run: ScenarioRun) -> ReportFiles:
    """Write the report of a computed scenario run into ``out_dir`` (see the module doc).

    The folder is built beside ``out_dir`` and renamed into place, so an interrupted or
    failed report (a full disk) leaves the previous report as it was.
    """
    sc = run.scenario
    with report_folder(out_dir) as (tmp, final):
        r = _Report(tmp, Page(f"testbed report — {sc.name}", sc.description or ""))
        if run.summary is not None:
            _summary(r, run.summary)
            _breakdown(r, run.summary, run.study)
            _interval_plot(r, run.summary, run.study)
            _interval_paired(r, run.study)
        if run.spec is not None and run.spec.checkpoint_terms:
            _checkpoint_cost(r, run.spec.checkpoint_terms)
        if run.input_precision is not None:
            _input_precision(r, run.input_precision)
        if run.events:
            _timeline(r, run)
        if run.comparison is not None:
            _strategies(r, run.comparison)
        if run.summary is not None:
            r.data.append(write_json(tmp / "summary.json", run.to_dict()))
        r.page.files([p.name for p in r.data])
        html = write_text(tmp / "index.html", r.page.render())
        names = (html.name, [p.name for p in r.pngs], [p.name for p in r.data])
    return ReportFiles(out_dir=final, html=final / names[0],
                       plots=tuple(final / n for n in names[1]),
                       data=tuple(final / n for n in names[2]))
