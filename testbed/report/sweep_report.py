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

from testbed.report import plots
from testbed.report.common import ReportFiles, pct, prepare_dir, write_csv, write_text
from testbed.report.html import Page
from testbed.sweep import simbridge
from testbed.units import format_duration

MAX_BARS = 40


def _numeric(key: str, value, facts: dict) -> float | None:
    """A grid value as a number for the x axis (durations in seconds)."""
    if key == "checkpoint.interval" and facts.get("interval_s"):
        return float(facts["interval_s"])
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


def report_from_store(database: str | Path, out_dir: str | Path, *,
                      sweep_id: str | None = None) -> ReportFiles:
    """Write the report of one sweep (default: the latest) of ``database`` into ``out_dir``."""
    from testbed.store import Store
    from testbed.sweep import aggregate

    with Store(database, create=False) as store:
        sweep = store.sweep(sweep_id)
        agg = aggregate(store, sweep["sweep_id"])
    out = prepare_dir(out_dir)
    keys = [k for k, _ in sweep["grid"]]
    done = [r for r in agg if r["done"]]
    page = Page(f"testbed sweep report — {sweep['name']}",
                f"sweep {sweep['sweep_id']} of {sweep['source']}: {len(agg)} point(s), "
                f"{len(done)} finished; code {sweep['code_version']}")
    pngs: list[Path] = []
    if not done:
        page.para("No point has finished yet: run the sweep (it resumes) and report again.")
    else:
        # ------------------------------------------------------------ ETTR lines
        x_key = next((k for k in keys if all(_numeric(k, r["params"][k], r["facts"])
                                             is not None for r in done)), None)
        series: dict[str, list] = {}
        marks: dict[str, list] = {}
        if x_key is None:
            others = keys
            for r in done:
                series.setdefault("", []).append((float(r["idx"]), r["ettr"]))
            x_label, log_x = "point index", False
        else:
            others = [k for k in keys if k != x_key]
            for r in done:
                name = _label(r["params"], others)
                series.setdefault(name, []).append(
                    (_numeric(x_key, r["params"][x_key], r["facts"]), r["ettr"]))
                if x_key == "checkpoint.interval":
                    f = r["facts"]
                    marks[name] = [(f[k], lab) for k, lab in (("young_interval_s", "Young"),
                                                             ("daly_interval_s", "Daly"))
                                   if f.get(k)]
            xs = [x for pts in series.values() for x, _ in pts]
            log_x = min(xs) > 0 and max(xs) / min(xs) >= 20
            x_label = x_key + (" (seconds)" if x_key.endswith(("interval", "mtbf", "cost",
                                                               "restart", "time"))
                               else "")
        plots.sweep_lines(out / "sweep_ettr.png", x_label, series,
                          f"ETTR across the sweep ({len(done)} points)", log_x=log_x,
                          marks=marks)
        pngs.append(out / "sweep_ettr.png")
        page.heading("ETTR across the grid")
        page.figure("sweep_ettr.png", "Mean ETTR with its 95% confidence band"
                    + (f" against {x_key}" if x_key else "")
                    + ("; Young (dotted) and Daly (dashed) optima per line"
                       if x_key == "checkpoint.interval" else "") + ".", "sweep_ettr")

        # ------------------------------------------------------------ breakdown
        shown = done
        if len(done) > MAX_BARS:
            step = len(done) / MAX_BARS
            shown = [done[int(i * step)] for i in range(MAX_BARS)]
        plots.breakdown_bars(out / "sweep_breakdown.png",
                             [_label(r["params"], keys) or f"#{r['idx']}" for r in shown],
                             [r["breakdown_s"] for r in shown],
                             "Where the time goes (mean per run)")
        pngs.append(out / "sweep_breakdown.png")
        page.heading("Where the time goes")
        page.figure("sweep_breakdown.png", "Mean wall time per run by category at each point"
                    + (f" ({len(shown)} of {len(done)} points, evenly spaced)"
                       if len(shown) < len(done) else "") + ".", "sweep_breakdown")

    # ---------------------------------------------------------------- table + CSV
    header = ["point", *keys, "replications", "ettr_mean", "ettr_ci95_low", "ettr_ci95_high",
              "wall_s_mean", "wall_s_ci95_low", "wall_s_ci95_high", "failures_mean",
              *simbridge.BREAKDOWN_COLUMNS, "seed"]
    rows = []
    for r in agg:
        if not r["done"]:
            continue
        rows.append([r["idx"], *[r["params"][k] for k in keys], r["replications"],
                     r["ettr"]["mean"], r["ettr"]["ci95_low"], r["ettr"]["ci95_high"],
                     r["wall_s"]["mean"], r["wall_s"]["ci95_low"], r["wall_s"]["ci95_high"],
                     r["failures"]["mean"],
                     *[r["breakdown_s"][c] for c in simbridge.BREAKDOWN_COLUMNS], r["seed"]])
    write_csv(out / "points.csv", header, rows)
    page.heading("Points")
    page.table(["point", *keys, "reps", "ETTR", "95% CI", "wall time", "failures"],
               [(r["idx"], *[r["params"][k] for k in keys], r["replications"],
                 pct(r["ettr"]["mean"]), f"[{pct(r['ettr']['ci95_low'])}, "
                 f"{pct(r['ettr']['ci95_high'])}]", format_duration(r["wall_s"]["mean"]),
                 f"{r['failures']['mean']:.2f}") for r in done])
    bad = [r for r in agg if r.get("infeasible")]
    if bad:
        page.heading("Infeasible points (skipped)")
        page.table(["point", *keys, "why"], [(r["idx"], *[r["params"][k] for k in keys],
                                              r["infeasible"]) for r in bad])
    page.files(["points.csv"])
    html = out / "index.html"
    write_text(html, page.render())
    return ReportFiles(out_dir=out, html=html, plots=tuple(pngs), data=(out / "points.csv",))
