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
from testbed.app.report.common import (
    ReportFiles,
    check_report_target,
    paired_ettr_difference,
    pct,
    report_folder,
)
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


def grid_unit(texts) -> tuple[float, str | None]:
    """The unit the user wrote a grid axis in: (size of one unit in the value's base
    unit, its name) — ``10min,30min,1h`` → (60, ``min``), the first unit written, so
    the axis reads in the user's terms; (1, None) for bare numbers."""
    import re

    from testbed.units import parse_bandwidth_Bps, parse_duration_s, parse_size_bytes
    for text in texts:
        m = re.fullmatch(r"\s*[0-9.eE+-]+\s*([A-Za-z/]+)\s*", str(text))
        if not m:
            continue
        for parse in (parse_duration_s, parse_size_bytes, parse_bandwidth_Bps):
            try:
                size = float(parse("1" + m.group(1)))
            except Exception:  # noqa: BLE001 - try the next unit family
                continue
            if size > 0:
                return size, m.group(1)
    return 1.0, None


def _label(params: dict, keys: list[str]) -> str:
    return ", ".join(f"{k.split('.')[-1]}={params[k]}" for k in keys) if keys else ""


def _ettr_series(done: list[PointAggregate], keys: list[str], texts: dict | None = None):
    """(x key, series name → [(x, ETTR dict)], Young/Daly marks, x label, log x); x in
    the unit the grid's values were written in (``texts``: key → the grid's texts)."""
    x_key = next((k for k in keys if all(_numeric(k, r.params[k], r.facts) is not None
                                         for r in done)), None)
    series: dict[str, list] = {}
    marks: dict[str, list] = {}
    if x_key is None:
        for r in done:
            series.setdefault("", []).append((float(r.idx), r.finished.ettr.to_dict()))
        return None, series, marks, "point index", False
    others = [k for k in keys if k != x_key]
    div, unit = grid_unit((texts or {}).get(x_key, ()))
    for r in done:
        name = _label(r.params, others)
        x = _numeric(x_key, r.params[x_key], r.facts)
        series.setdefault(name, []).append((x / div if x is not None else x,
                                            r.finished.ettr.to_dict()))
        if x_key == "checkpoint.interval":
            marks[name] = [(v / div, lab) for v, lab in ((r.facts.young_interval_s, "Young"),
                                                         (r.facts.daly_interval_s, "Daly"))
                           if v]
    xs = [x for pts in series.values() for x, _ in pts]
    log_x = min(xs) > 0 and max(xs) / min(xs) >= 20
    if unit is None and x_key.endswith(("interval", "mtbf", "cost", "restart", "time")):
        unit = "s"
    label = x_key + (f" ({unit}, as the grid gives it)" if unit else "")
    return x_key, series, marks, label, log_x


def _figures(out: Path, page: Page, done: list[PointAggregate], keys: list[str],
             texts: dict) -> list[Path]:
    x_key, series, marks, x_label, log_x = _ettr_series(done, keys, texts)
    plots.sweep_lines(out / "sweep_ettr.png", x_label, series,
                      f"ETTR across the sweep ({len(done)} points)", log_x=log_x, marks=marks)
    page.heading("ETTR across the grid")
    page.figure("sweep_ettr.png", "Mean ETTR with its 95% confidence band"
                + (f" against {x_label}" if x_key else "")
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
    page.figure("sweep_breakdown.png", "Mean wall time per run by category at each point "
                "(top) and the overhead alone, in % of the useful compute (bottom)"
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


def _replications(store: Store, sweep: dict) -> dict[int, list[tuple[float, float]]]:
    """(useful_s, wall_s) of every replication of each finished point, by point index."""
    return {p["idx"]: [(float(u), float(w)) for u, w in
                       store.outcomes(p["point_key"], ("useful_s", "wall_s"))]
            for p in store.plan(sweep["sweep_id"]) if p["done"]}


def _paired(out: Path, page: Page, done: list[PointAggregate], keys: list[str],
            reps: dict[int, list[tuple[float, float]]]) -> Path:
    """Each point against the best point of its line (the same values of every grid key
    but the first), replication by replication — common random numbers — with the
    paired 95% CI: plot, table and CSV."""
    lines: dict[str, list[PointAggregate]] = {}
    for r in done:
        lines.setdefault(_label(r.params, keys[1:]), []).append(r)
    rows = []
    for members in lines.values():
        best = max(members, key=lambda r: (r.finished.ettr.mean, -r.idx))
        for r in members:
            if r.idx != best.idx and r.idx in reps and best.idx in reps:
                rows.append((r, best, paired_ettr_difference(reps[r.idx], reps[best.idx])))
    rows.sort(key=lambda x: (_label(x[1].params, keys[1:]), -x[2].difference))
    path = out / "sweep_paired.png"
    lead = keys[0] if keys else "point"
    plots.paired_differences(
        path, [_label(r.params, keys) or f"#{r.idx}" for r, _, _ in rows],
        [(d.difference, d.ci95_low, d.ci95_high) for _, _, d in rows],
        f"the best {lead.split('.')[-1]} of its line",
        "Each point against the best of its line, on the same random numbers")
    write_csv(out / "paired.csv", ["point", *keys, "reference_point", "ettr_difference",
                                   "ci95_low", "ci95_high", "pairs"],
              [(r.idx, *[r.params[k] for k in keys], b.idx, d.difference, d.ci95_low,
                d.ci95_high, d.pairs) for r, b, d in rows])
    worse = sum(1 for _, _, d in rows if d.ci95_high < 0)
    page.heading("Paired differences (common random numbers)")
    page.figure("sweep_paired.png",
                "The sweep ran with common random numbers: replication r of every point saw "
                "the same random draws, so the ETTR difference of each point from the best "
                f"point of its line (same values of every key but {lead}) is taken "
                "replication by replication; its 95% interval is far narrower than the "
                f"points' own intervals, which overlap. {worse} of {len(rows)} points are "
                "worse than their line's best beyond doubt (red: the whole interval below "
                "zero).", "sweep_paired")
    page.table(["point", *keys, "against point", "Δ ETTR (pp)", "paired 95% CI (pp)"],
               [(r.idx, *[r.params[k] for k in keys], b.idx, f"{100 * d.difference:+.3f}",
                 f"[{100 * d.ci95_low:+.3f}, {100 * d.ci95_high:+.3f}]")
                for r, b, d in rows])
    return path


def report_from_store(database: str | Path, out_dir: str | Path, *,
                      sweep_id: str | None = None) -> ReportFiles:
    """Write the report of one sweep (default: the latest) of ``database`` into ``out_dir``
    (built in a temporary folder and renamed into place; the database is only read)."""
    check_report_target(out_dir)
    with Store.open_readonly(database) as store:
        sweep = store.sweep(sweep_id)
        agg = aggregate(store, sweep["sweep_id"])
        paired = _replications(store, sweep) if sweep["common_seed"] else None
    keys = [k for k, _ in sweep["grid"]]
    texts = {k: tuple(v) for k, v in sweep["grid"]}
    done = [r for r in agg if r.done]
    page = Page(f"testbed sweep report — {sweep['name']}",
                f"sweep {sweep['sweep_id']} of {sweep['source']}: {len(agg)} point(s), "
                f"{len(done)} finished; code {sweep['code_version']}")
    with report_folder(out_dir) as (tmp, final):
        pngs = []
        if not done:
            page.para("No point has finished yet: run the sweep (it resumes) and report again.")
        else:
            pngs = [p.name for p in _figures(tmp, page, done, keys, texts)]
            if paired is not None:
                pngs.append(_paired(tmp, page, done, keys, paired).name)
        _points_table(tmp, page, agg, keys)
        page.files(["points.csv"] + (["paired.csv"] if paired is not None and done else []))
        if paired is None and len(done) > 1:
            page.para("The points do not share random numbers, so each is compared through "
                      "its own interval; run the sweep with --common-random-numbers for "
                      "paired differences between points.")
        write_text(tmp / "index.html", page.render())
    data = (final / "points.csv",) + ((final / "paired.csv",) if paired is not None and done
                                       else ())
    return ReportFiles(out_dir=final, html=final / "index.html",
                       plots=tuple(final / n for n in pngs), data=data)
