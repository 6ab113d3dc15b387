"""The report's PNG plots (matplotlib, Agg backend, no display needed).

Each function draws one figure from plain data and writes it to ``path``; none of
them computes results. Colours are fixed per category so every plot of a report
reads the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: Category → (label, colour) for where the time goes.
CATEGORIES = {
    "useful_s": ("useful compute", "#4C9F70"),
    "checkpoint_s": ("checkpoints", "#3B75AF"),
    "lost_s": ("lost work", "#D1495B"),
    "restart_s": ("restart", "#EDAE49"),
    "waiting_s": ("waiting for nodes", "#8E7DBE"),
}
_DPI = 110


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _log_ticks(ax) -> None:
    """Plain numbers (0.5, 1, 2) on a log axis instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI, metadata={"Software": None})
    _plt().close(fig)


def _duration_axis(seconds: float) -> tuple[float, str]:
    """A unit that makes ``seconds`` readable: (divisor, name)."""
    for div, name in ((86400.0, "days"), (3600.0, "hours"), (60.0, "minutes")):
        if seconds >= 2 * div:
            return div, name
    return 1.0, "seconds"


#: The categories that are overhead (everything but useful compute).
OVERHEAD = tuple(k for k in CATEGORIES if k != "useful_s")


def overhead_shares(breakdown: dict) -> dict[str, float]:
    """Each overhead category as a share of the useful compute (0.02 = 2 % of useful)."""
    useful = breakdown.get("useful_s", 0.0)
    return {k: (breakdown.get(k, 0.0) / useful if useful > 0 else 0.0) for k in OVERHEAD}


def breakdown_bars(path: Path, labels: Sequence[str], breakdowns: Sequence[dict],
                   title: str) -> None:
    """Where the wall time went (mean per run), one bar per label, in two panels: the
    whole wall time stacked (how long), and the overhead alone as a share of the useful
    compute, on its own axis (so a 2 % overhead is as visible as a 40 % one)."""
    plt = _plt()
    total = max(sum(b.values()) for b in breakdowns) if breakdowns else 1.0
    div, unit = _duration_axis(total)
    many = len(labels) > 12
    width = min(14.0, max(7.5, 0.7 * len(labels) + 3.5))
    fig, (ax, ax2) = plt.subplots(2, 1, sharex=True, figsize=(width, 8.0 if many else 7.0),
                                  gridspec_kw={"height_ratios": [1, 1.25]})
    xs = range(len(labels))
    bottom = [0.0] * len(labels)
    for key, (name, colour) in CATEGORIES.items():
        vals = [b.get(key, 0.0) / div for b in breakdowns]
        ax.bar(xs, vals, bottom=bottom, color=colour, label=name, width=0.7)
        bottom = [a + v for a, v in zip(bottom, vals, strict=True)]
    shares = [overhead_shares(b) for b in breakdowns]
    bottom = [0.0] * len(labels)
    for key in OVERHEAD:
        vals = [100 * s[key] for s in shares]
        ax2.bar(xs, vals, bottom=bottom, color=CATEGORIES[key][1], width=0.7)
        bottom = [a + v for a, v in zip(bottom, vals, strict=True)]
    for x, top in zip(xs, bottom, strict=True):
        ax2.text(x, top, f"{top:.2g}%" if top < 10 else f"{top:.0f}%", ha="center",
                 va="bottom", fontsize=6 if many else 7)
    ax2.set_ylim(0, max(bottom + [0.1]) * 1.15)
    ax2.set_xticks(list(xs))
    ax2.set_xticklabels(labels, rotation=60 if many else (30 if len(labels) > 3 else 0),
                        ha="right" if len(labels) > 3 else "center", fontsize=6 if many else 8)
    ax.set_ylabel(f"mean wall time ({unit})")
    ax.set_title(f"{title}: the whole run", fontsize=10)
    ax2.set_ylabel("overhead (% of useful compute)")
    ax2.set_title("the overhead alone (checkpoints, lost work, restarts, waiting), in % of "
                  "the useful compute", fontsize=9)
    ax2.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(fig, path)


def ettr_vs_interval(path: Path, points: Sequence[dict], *, young_s: float | None,
                     daly_s: float | None, chosen_s: float | None,
                     analytic: Sequence[tuple[float, float]] = (),
                     reference_ettr: float | None = None, reference_label: str = "",
                     title: str = "") -> None:
    """ETTR (mean and 95% CI) against the checkpoint interval, Young/Daly optima marked.

    ``points`` have ``interval_s`` and ``ettr`` (``mean``, ``ci95_low``, ``ci95_high``);
    ``analytic`` is the closed-form curve where it holds.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10.0, 4.4))
    xs = [p["interval_s"] for p in points]
    scale = max(xs + [x for x, _ in analytic] + [1.0])
    div, unit = _duration_axis(scale)
    if analytic:
        ax.plot([x / div for x, _ in analytic], [100 * y for _, y in analytic], color="#555",
                lw=1.2, label="closed form (exponential failures)")
    means = [100 * p["ettr"]["mean"] for p in points]
    lo = [m - 100 * p["ettr"]["ci95_low"] for m, p in zip(means, points, strict=True)]
    hi = [100 * p["ettr"]["ci95_high"] - m for m, p in zip(means, points, strict=True)]
    ax.errorbar([x / div for x in xs], means, yerr=[lo, hi], fmt="o", color="#3B75AF",
                capsize=3, label="simulated (mean, 95% CI)")
    def near(a: float | None, b: float | None) -> bool:
        return bool(a and b and abs(a - b) <= 0.01 * b)

    own = chosen_s if chosen_s and not near(chosen_s, young_s) and \
        not near(chosen_s, daly_s) else None
    for x_s, label, colour, marker, ls, lw in (
            (young_s, "Young optimum", "#EDAE49", "v", "--", 2.6),
            (daly_s, "Daly optimum", "#D1495B", "^", "-.", 1.3),
            (own, "scenario's interval", "#4C9F70", None, ":", 1.3)):
        if not x_s:
            continue
        notes = [n for n, v in (("Young", young_s), ("Daly", daly_s))
                 if n not in label and near(v, x_s)]
        if chosen_s and own is None and near(chosen_s, x_s) and marker == "^":
            notes.append("the scenario's")
        text = f"{label} {x_s / div:.3g} {unit}" + (f" (= {', '.join(notes)} within 1%)"
                                                    if notes else "")
        ax.axvline(x_s / div, color=colour, ls=ls, lw=lw, label=text, zorder=1)
        if marker:   # Young on the top edge, Daly on the bottom: coinciding, both show
            ax.plot([x_s / div], [1.0 if marker == "v" else 0.0], marker=marker,
                    color=colour, ms=9, clip_on=False, transform=ax.get_xaxis_transform(),
                    zorder=4)
    if reference_ettr is not None:
        ax.axhline(100 * reference_ettr, color="#8E7DBE", ls="--", lw=1.0,
                   label=reference_label or "scenario")
    ax.set_xscale("log")
    _log_ticks(ax)
    ax.set_xlabel(f"checkpoint interval, compute between checkpoints ({unit}, log scale)")
    ax.set_ylabel("ETTR (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # beside, not over
    _save(fig, path)


def _segments(events: Sequence[dict]) -> tuple[dict[str, list], list[float], list[float]]:
    """Turn an event log into time spans per activity, failure times and commit times.

    Compute (and checkpoint writing) done after the checkpoint a restart rolls back to
    (``restart_begin``'s ``checkpoint``) is re-labelled as lost.
    """
    spans: dict[str, list] = {k: [] for k in ("compute", "checkpoint", "restart", "waiting",
                                               "lost")}
    work: list[list] = []          # [kind, start, length] of compute/checkpoint, relabelled
    failures: list[float] = []
    commits: list[float] = []
    commit_time: dict[int, float] = {0: 0.0}
    nxt = {"job_start": "compute", "checkpoint_begin": "checkpoint",
           "checkpoint_commit": "compute", "checkpoint_abort": "restart",
           "failure": "restart", "restart_begin": "restart", "wait": "waiting",
           "load": "restart", "restart_end": "compute", "maintenance": "waiting",
           "job_end": None}
    state, start = None, 0.0
    for e in events:
        t, kind = float(e["t_s"]), e["event"]
        new = state if kind == "steps" else nxt.get(kind, state)
        if state is not None and t > start and (new != state or kind == "failure"):
            if state in ("compute", "checkpoint"):
                work.append([state, start, t - start])
            else:
                spans[state].append((start, t - start))
            start = t
        elif state is None:
            start = t
        if kind == "checkpoint_commit":
            commits.append(t)
            commit_time[int(e.get("checkpoint", 0))] = t
        elif kind == "failure":
            failures.append(t)
        elif kind == "restart_begin":
            since = commit_time.get(int(e.get("checkpoint", 0)), 0.0)
            for w in work:
                if w[1] >= since and w[0] in ("compute", "checkpoint"):
                    w[0] = "lost"
        state = new
    for kind, a, length in work:
        spans[kind].append((a, length))
    return spans, failures, commits


#: Bins of the timeline's checkpoint row (a run with hundreds of checkpoints is drawn
#: as commits per bin, not as a barcode of ticks).
TIMELINE_BINS = 60


def checkpoint_bins(commits: Sequence[float], end_s: float, bins: int
                    ) -> list[tuple[float, int]]:
    """(bin start in seconds, commits in it) of the non-empty bins of ``[0, end_s]``."""
    if not commits or end_s <= 0:
        return []
    counts = [0] * bins
    for t in commits:
        counts[min(int(t / end_s * bins), bins - 1)] += 1
    return [(i * end_s / bins, n) for i, n in enumerate(counts) if n]


def format_span(seconds: float) -> str:
    """A bin width in words (``17.6 min``)."""
    from testbed.units import format_duration
    return format_duration(seconds)


def timeline(path: Path, events: Sequence[dict], title: str) -> None:
    """One replication: compute, checkpoints, failures, lost work and restarts over time."""
    plt = _plt()
    spans, failures, commits = _segments(events)
    end = max((float(e["t_s"]) for e in events), default=1.0) or 1.0
    div, unit = _duration_axis(end)
    fig, ax = plt.subplots(figsize=(10.0, 3.0))
    rows = [("compute", "compute (kept)", "#4C9F70", 3),
            ("lost", "work lost to a failure", "#D1495B", 3),
            ("restart", "restart", "#EDAE49", 1), ("waiting", "waiting", "#8E7DBE", 1)]
    if len(commits) <= TIMELINE_BINS // 2:   # few: each checkpoint drawn where it was written
        rows.append(("checkpoint", "checkpoint", "#3B75AF", 2))
    min_w = 0.0015 * end / div       # short events stay visible: at least 0.15% wide
    for key, label, colour, y in rows:
        if spans[key]:
            widen = 0.0 if key == "compute" else min_w
            ax.broken_barh([(a / div, max(w / div, widen)) for a, w in spans[key]],
                           (y - 0.35, 0.7), facecolors=colour, label=label)
    if failures:
        ax.scatter([t / div for t in failures], [4.0] * len(failures), marker="v",
                   color="#D1495B", zorder=3, label=f"failure ({len(failures)})")
    bins = checkpoint_bins(commits, end, TIMELINE_BINS) \
        if len(commits) > TIMELINE_BINS // 2 else []
    if bins:
        width = end / div / TIMELINE_BINS
        most = max(n for _, n in bins)
        ax.bar([(a + 0.5 * end / TIMELINE_BINS) / div for a, _ in bins],
               [0.7 * n / most for _, n in bins], width=0.9 * width,
               bottom=1.65, color="#3B75AF", alpha=0.8,
               label=f"checkpoints committed ({len(commits)}; bar height: per "
                     f"{format_span(end / TIMELINE_BINS)}, at most {most})")
    ax.set_yticks([1, 2, 3, 4])
    ax.set_yticklabels(["restart / wait", "checkpoint", "training", "failures"], fontsize=8)
    ax.set_ylim(0.4, 4.6)
    ax.set_xlim(0, end / div)
    ax.set_xlabel(f"wall-clock time ({unit})")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(fig, path)


def strategies(path: Path, rows: Sequence[dict], title: str,
               infeasible: Sequence[tuple[str, int, str]] = ()) -> None:
    """The oracle's best configuration per strategy: samples per second (higher is
    better); a strategy with no feasible configuration gets a row saying why
    (``infeasible``: strategy, GPU count of the reason, reason), instead of vanishing."""
    plt = _plt()
    rows = sorted(rows, key=lambda r: r["samples_per_s"])
    n = len(rows) + len(infeasible)
    fig, ax = plt.subplots(figsize=(9.0, 0.45 * n + 1.6))
    top = max([r["samples_per_s"] for r in rows] + [1.0])
    bad = list(infeasible)[::-1]
    for y, (_name, gpus, reason) in enumerate(bad):
        where = f" ({gpus} GPU{'s' if gpus != 1 else ''})" if gpus else ""
        ax.text(0.01 * top, y, f"infeasible: {reason}{where}",
                va="center", fontsize=7, color="#8a2432")
    ys = range(len(bad), n)
    ax.barh(list(ys), [r["samples_per_s"] for r in rows], color="#3B75AF")
    ax.set_yticks(list(range(n)))
    ax.set_yticklabels([f"{s} (none fits)" for s, _, _ in bad]
                       + [f"{r['strategy']} ({r['gpus']} GPUs)" for r in rows], fontsize=8)
    for label in ax.get_yticklabels()[:len(bad)]:
        label.set_color("#8a2432")
    for y, r in zip(ys, rows, strict=True):
        ax.text(r["samples_per_s"], y, f" {r['samples_per_s']:,.0f}/s · {r['bottleneck']}",
                va="center", fontsize=7)
    if bad:
        ax.axhline(len(bad) - 0.5, color="#999", lw=0.6)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel("samples per second (oracle)")
    ax.set_xlim(0, top * 1.35)
    ax.set_title(title, fontsize=10)
    _save(fig, path)


def input_precision_bars(path: Path, rows: Sequence[dict], title: str) -> None:
    """Time per iteration split into compute and exposed input I/O, one bar per input
    precision (``rows``: ``label``, ``compute_s``, ``io_s``, ``other_s``)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    xs = list(range(len(rows)))
    parts = (("compute_s", "compute", "#4C9F70"), ("io_s", "exposed input I/O", "#D1495B"),
             ("other_s", "communication and the rest", "#8E7DBE"))
    bottom = [0.0] * len(rows)
    for key, label, colour in parts:
        vals = [1e3 * r[key] for r in rows]
        ax.bar(xs, vals, bottom=bottom, color=colour, label=label, width=0.6)
        bottom = [a + v for a, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(xs)
    ax.set_xticklabels([r["label"] for r in rows])
    ax.set_ylabel("time per iteration (ms, oracle)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    _save(fig, path)


def checkpoint_terms(path: Path, terms: dict, title: str) -> None:
    """One checkpoint's write cost by term (device-to-host, serialise, transfer, …)."""
    plt = _plt()
    names = [("device_to_host_s", "device→host"), ("serialize_s", "serialise"),
             ("transfer_s", "transfer"), ("metadata_s", "file create"), ("fsync_s", "fsync")]
    vals = [terms.get(k, 0.0) for k, _ in names]
    fig, ax = plt.subplots(figsize=(6.0, 2.8))
    ax.barh([lab for _, lab in names], vals, color="#3B75AF")
    for y, v in enumerate(vals):
        ax.text(v, y, f" {v * 1e3:.1f} ms", va="center", fontsize=7)
    ax.set_xlabel("seconds per checkpoint write")
    ax.set_xlim(0, max(vals + [1e-3]) * 1.3)
    ax.set_title(title, fontsize=10)
    _save(fig, path)


def sweep_lines(path: Path, xs_label: str, series: dict[str, list[tuple[float, dict]]],
                title: str, *, log_x: bool,
                marks: dict[str, Sequence[tuple[float, str]]] | None = None) -> None:
    """ETTR against one numeric grid key, one line per combination of the other keys.

    ``marks`` gives per line the x positions of reference values (Young, Daly), drawn
    in the line's colour.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9.5, 4.6))
    styles = {"Young": ":", "Daly": "--"}
    for name, pts in series.items():
        pts = sorted(pts, key=lambda p: p[0])
        xs = [x for x, _ in pts]
        m = [100 * e["mean"] for _, e in pts]
        lo = [100 * e["ci95_low"] for _, e in pts]
        hi = [100 * e["ci95_high"] for _, e in pts]
        line, = ax.plot(xs, m, marker="o", ms=3, label=name or "ETTR")
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
        for x, label in (marks or {}).get(name, ()):
            ax.axvline(x, ls=styles.get(label, "-."), lw=0.9, color=line.get_color())
    if log_x:
        ax.set_xscale("log")
        _log_ticks(ax)
    ax.set_xlabel(xs_label)
    ax.set_ylabel("ETTR (%), mean and 95% CI")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if len(series) <= 1:
        handles, labels = [], []
    if marks and any(marks.values()):
        from matplotlib.lines import Line2D
        used = {lab for ms in marks.values() for _, lab in ms}
        for lab in ("Young", "Daly"):
            if lab in used:
                handles.append(Line2D([], [], color="#555", ls=styles[lab], lw=0.9))
                labels.append(f"{lab} optimum (line's colour)")
    if handles:      # beside the axes, so it covers no point
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _save(fig, path)


def paired_differences(path: Path, labels: Sequence[str], diffs: Sequence[tuple[float, float,
                       float]], reference: str, title: str) -> None:
    """ETTR difference of each point from a reference point, in percentage points, with
    its paired 95% CI (``diffs``: difference, low, high as fractions)."""
    plt = _plt()
    n = len(labels)
    fig, ax = plt.subplots(figsize=(8.5, 0.32 * n + 1.8))
    ys = list(range(n))[::-1]
    mids = [100 * d for d, _, _ in diffs]
    lo = [100 * (d - a) for d, a, _ in diffs]
    hi = [100 * (b - d) for d, _, b in diffs]
    for y, m, a, b, (_, _, h) in zip(ys, mids, lo, hi, diffs, strict=True):
        colour = "#D1495B" if h < 0 else "#3B75AF"    # red: worse beyond doubt
        ax.errorbar([m], [y], xerr=[[a], [b]], fmt="o", ms=4, color=colour, capsize=2,
                    lw=1.2)
    ax.axvline(0.0, color="#333", lw=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel(f"ETTR − ETTR of {reference} (percentage points, paired 95% CI)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    _save(fig, path)
