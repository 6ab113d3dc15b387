"""The report of a sweep in a results database: ETTR per point, where the time goes, CSV.

:func:`report_from_store` writes ``index.html`` with

* ``sweep_ettr.png`` — ETTR (mean, 95% CI band) against the first numeric grid key,
  one line per combination of the other keys; when that key is the checkpoint
  interval, each line's Young and Daly optima are marked in its colour;
* ``sweep_breakdown.png`` — where the time goes at each point (at most 40 points,
  evenly spaced through the plan, when the sweep is larger);
* ``points.csv`` — one row per point: grid values, replications, ETTR and wall time
  with 95% CI, failures and the breakdown.
"""

from __future__ import annotations

from pathlib import Path

from testbed.app.report import plots
from testbed.app.report.common import ReportFiles, check_report_target, pct, report_folder
from testbed.app.report.html import Page
from testbed.app.results_db import Store
from testbed.app.sweep import PointAggregate, aggregate
from testbed.io.write import write_csv, write_text
from testbed.outcomes import BREAKDOWN_KEYS
from testbed.resilience.spec import SpecFacts
from testbed.units import format_duration

MAX_BARS = 40


def _numeric(key: str, value, facts: SpecFacts) -> float | None:
    """A grid value as a number for the x axis (durations in seconds)."""
    if key == "checkpoint.interval" and facts.interval_s:
        return float(facts.interval_s)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        from testbed.units import parse_bandwidth_Bps, parse_duration_s, parse_size_bytes
        for parse in (parse_duration_s, parse_size_bytes, parse_bandwidth_Bps):
            try:
                return float(parse(value))
            except Exception:  # noqa: BLE001 - try the next unit family
                continue
    return None


def _label(params: dict, keys: list[str]) -> str:
    return ", ".join(f"{k.split('.')[-1]}={params[k]}" for k in keys) if keys else ""


def _ettr_series(done: list[PointAggregate], keys: list[str]):
    """(x key, series name → [(x, ETTR dict)], Young/Daly marks, x label, log x)."""
    x_key = next((k for k in keys if all(_numeric(k, r.params[k], r.facts) is not None
                                         for r in done)), None)
    series: dict[str, list] = {}
    marks: dict[str, list] = {}
    if x_key is None:
        for r in done:
            series.setdefault("", []).append((float(r.idx), r.finished.ettr.to_dict()))
        return None, series, marks, "point index", False
    others = [k for k in keys if k != x_key]
    for r in done:
        name = _label(r.params, others)
        series.setdefault(name, []).append((_numeric(x_key, r.params[x_key], r.facts),
                                            r.finished.ettr.to_dict()))
        if x_key == "checkpoint.interval":
            marks[name] = [(v, lab) for v, lab in ((r.facts.young_interval_s, "Young"),
                                                   (r.facts.daly_interval_s, "Daly")) if v]
    xs = [x for pts in series.values() for x, _ in pts]
    log_x = min(xs) > 0 and max(xs) / min(xs) >= 20
    label = x_key + (" (seconds)" if x_key.endswith(("interval", "mtbf", "cost", "restart",
                                                     "time")) else "")
    return x_key, series, marks, label, log_x


def _figures(out: Path, page: Page, done: list[PointAggregate], keys: list[str]) -> list[Path]:
    x_key, series, marks, x_label, log_x = _ettr_series(done, keys)
    plots.sweep_lines(out / "sweep_ettr.png", x_label, series,
                      f"ETTR across the sweep ({len(done)} points)", log_x=log_x, marks=marks)
    page.heading("ETTR across the grid")
    page.figure("sweep_ettr.png", "Mean ETTR with its 95% confidence band"
                + (f" against {x_key}" if x_key else "")
                + ("; Young (dotted) and Daly (dashed) optima per line"
                   if x_key == "checkpoint.interval" else "") + ".", "sweep_ettr")
    shown = done
    if len(done) > MAX_BARS:
        step = len(done) / MAX_BARS
        shown = [done[int(i * step)] for i in range(MAX_BARS)]
    plots.breakdown_bars(out / "sweep_breakdown.png",
                         [_label(r.params, keys) or f"#{r.idx}" for r in shown],
                         [r.finished.breakdown_s.to_dict() for r in shown],
                         "Where the time goes (mean per run)")
    page.heading("Where the time goes")
    page.figure("sweep_breakdown.png", "Mean wall time per run by category at each point"
                + (f" ({len(shown)} of {len(done)} points, evenly spaced)"
                   if len(shown) < len(done) else "") + ".", "sweep_breakdown")
    return [out / "sweep_ettr.png", out / "sweep_breakdown.png"]


def _points_table(out: Path, page: Page, agg: list[PointAggregate], keys: list[str]) -> None:
    done = [r for r in agg if r.done]
    header = ["point", *keys, "replications", "ettr_mean", "ettr_ci95_low", "ettr_ci95_high",
              "wall_s_mean", "wall_s_ci95_low", "wall_s_ci95_high", "failures_mean",
              *BREAKDOWN_KEYS, "seed"]
    rows = []
    for r in done:
        st = r.finished
        rows.append([r.idx, *[r.params[k] for k in keys], st.replications, st.ettr.mean,
                     st.ettr.ci95_low, st.ettr.ci95_high, st.wall_time_s.mean,
                     st.wall_time_s.ci95_low, st.wall_time_s.ci95_high, st.failures.mean,
                     *[getattr(st.breakdown_s, c) for c in BREAKDOWN_KEYS], r.seed])
    write_csv(out / "points.csv", header, rows)
    page.heading("Points")
    page.table(["point", *keys, "reps", "ETTR", "95% CI", "wall time", "failures"],
               [(r.idx, *[r.params[k] for k in keys], r.finished.replications,
                 pct(r.finished.ettr.mean), f"[{pct(r.finished.ettr.ci95_low)}, "
                 f"{pct(r.finished.ettr.ci95_high)}]", format_duration(r.finished.wall_time_s.mean),
                 f"{r.finished.failures.mean:.2f}") for r in done])
    bad = [r for r in agg if r.infeasible]
    if bad:
        page.heading("Infeasible points (skipped)")
        page.table(["point", *keys, "why"], [(r.idx, *[r.params[k] for k in keys],
                                              r.infeasible) for r in bad])


def report_from_store(database: str | Path, out_dir: str | Path, *,
                      sweep_id: str | None = None) -> ReportFiles:
    """Write the report of one sweep (default: the latest) of ``database`` into ``out_dir``
    (built in a temporary folder and renamed into place; the database is only read)."""
    check_report_target(out_dir)
    with Store.open_readonly(database) as store:
        sweep = store.sweep(sweep_id)
        agg = aggregate(store, sweep["sweep_id"])
    keys = [k for k, _ in sweep["grid"]]
    done = [r for r in agg if r.done]
    page = Page(f"testbed sweep report — {sweep['name']}",
                f"sweep {sweep['sweep_id']} of {sweep['source']}: {len(agg)} point(s), "
                f"{len(done)} finished; code {sweep['code_version']}")
    with report_folder(out_dir) as (tmp, final):
        pngs = []
        if not done:
            page.para("No point has finished yet: run the sweep (it resumes) and report again.")
        else:
            pngs = [p.name for p in _figures(tmp, page, done, keys)]
        _points_table(tmp, page, agg, keys)
        page.files(["points.csv"])
        write_text(tmp / "index.html", page.render())
    return ReportFiles(out_dir=final, html=final / "index.html",
                       plots=tuple(final / n for n in pngs), data=(final / "points.csv",))
