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


def breakdown_bars(path: Path, labels: Sequence[str], breakdowns: Sequence[dict],
                   title: str) -> None:
    """Stacked bars: where the wall time went (mean per run), one bar per label."""
    plt = _plt()
    total = max(sum(b.values()) for b in breakdowns) if breakdowns else 1.0
    div, unit = _duration_axis(total)
    many = len(labels) > 12
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.7 * len(labels) + 3)),
                                    5.2 if many else 4.4))
    bottom = [0.0] * len(labels)
    for key, (name, colour) in CATEGORIES.items():
        vals = [b.get(key, 0.0) / div for b in breakdowns]
        ax.bar(range(len(labels)), vals, bottom=bottom, color=colour, label=name, width=0.7)
        bottom = [a + v for a, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60 if many else (30 if len(labels) > 3 else 0),
                       ha="right" if len(labels) > 3 else "center", fontsize=6 if many else 8)
    ax.set_ylabel(f"mean wall time ({unit})")
    ax.set_title(title, fontsize=10)
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
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
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
    if young_s:
        ax.axvline(young_s / div, color="#EDAE49", ls="--", lw=1.2,
                   label=f"Young optimum {young_s / div:.3g} {unit}")
    if daly_s:
        ax.axvline(daly_s / div, color="#D1495B", ls="-.", lw=1.2,
                   label=f"Daly optimum {daly_s / div:.3g} {unit}")
    if chosen_s and chosen_s not in (young_s, daly_s):
        ax.axvline(chosen_s / div, color="#4C9F70", ls=":", lw=1.2,
                   label=f"scenario's interval {chosen_s / div:.3g} {unit}")
    if reference_ettr is not None:
        ax.axhline(100 * reference_ettr, color="#8E7DBE", ls="--", lw=1.0,
                   label=reference_label or "scenario")
    ax.set_xscale("log")
    _log_ticks(ax)
    ax.set_xlabel(f"checkpoint interval, compute between checkpoints ({unit}, log scale)")
    ax.set_ylabel("ETTR (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
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


def timeline(path: Path, events: Sequence[dict], title: str) -> None:
    """One replication: compute, checkpoints, failures, lost work and restarts over time."""
    plt = _plt()
    spans, failures, commits = _segments(events)
    end = max((float(e["t_s"]) for e in events), default=1.0) or 1.0
    div, unit = _duration_axis(end)
    fig, ax = plt.subplots(figsize=(10.0, 3.0))
    rows = [("compute", "compute (kept)", "#4C9F70", 3),
            ("lost", "work lost to a failure", "#D1495B", 3),
            ("checkpoint", "checkpoint", "#3B75AF", 2), ("restart", "restart", "#EDAE49", 1),
            ("waiting", "waiting", "#8E7DBE", 1)]
    min_w = 0.0015 * end / div       # short events stay visible: at least 0.15% wide
    for key, label, colour, y in rows:
        if spans[key]:
            widen = 0.0 if key == "compute" else min_w
            ax.broken_barh([(a / div, max(w / div, widen)) for a, w in spans[key]],
                           (y - 0.35, 0.7), facecolors=colour, label=label)
    if failures:
        ax.scatter([t / div for t in failures], [4.0] * len(failures), marker="v",
                   color="#D1495B", zorder=3, label=f"failure ({len(failures)})")
    if commits and len(commits) <= 400:
        ax.vlines([t / div for t in commits], 1.6, 2.4, colors="#1d3f63", lw=0.6)
    ax.set_yticks([1, 2, 3, 4])
    ax.set_yticklabels(["restart / wait", "checkpoint", "training", "failures"], fontsize=8)
    ax.set_ylim(0.4, 4.6)
    ax.set_xlim(0, end / div)
    ax.set_xlabel(f"wall-clock time ({unit})")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(fig, path)


def strategies(path: Path, rows: Sequence[dict], title: str) -> None:
    """The oracle's best configuration per strategy: samples per second (higher is better)."""
    plt = _plt()
    rows = sorted(rows, key=lambda r: r["samples_per_s"])
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(rows) + 1.6))
    ys = range(len(rows))
    ax.barh(list(ys), [r["samples_per_s"] for r in rows], color="#3B75AF")
    ax.set_yticks(list(ys))
    ax.set_yticklabels([f"{r['strategy']} ({r['gpus']} GPUs)" for r in rows], fontsize=8)
    for y, r in zip(ys, rows, strict=True):
        ax.text(r["samples_per_s"], y, f" {r['samples_per_s']:,.0f}/s · {r['bottleneck']}",
                va="center", fontsize=7)
    ax.set_xlabel("samples per second (oracle)")
    ax.set_xlim(0, max([r["samples_per_s"] for r in rows] + [1.0]) * 1.35)
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
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
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
    if len(series) > 1:
        ax.legend(fontsize=7, loc="best")
    _save(fig, path)
