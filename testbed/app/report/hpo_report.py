"""The report of an HPO sweep: Gantt chart of trials on workers, utilisation over time,
best value found against time — PNG plots, CSV data and an HTML page.

``testbed hpo report SOURCE -o DIR``: SOURCE is a scenario (its ``hpo:`` section is
simulated) or a schedule trace (``.jsonl``: a real run's ``--trace`` or a simulated
``--events`` log). Everything is computed from the trace by
:func:`testbed.hpo.trace.summarise` and :func:`attempts`; the plots only draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed import events as ev
from testbed.app.report.common import ReportFiles, report_folder
from testbed.app.report.html import Page
from testbed.hpo.trace import HpoSummary, parse_trace, summarise
from testbed.io.write import write_csv, write_text
from testbed.units import format_duration

#: Outcome → colour of an attempt's bar.
OUTCOMES = {"completed": "#4C9F70", "paused": "#3B75AF", "stopped": "#8E6C8A",
            "failed": "#D1495B", "preempted": "#EDAE49", "cancelled": "#9A9A9A",
            "running": "#CCCCCC"}
#: Most worker rows a Gantt chart draws (the rest are summarised in its caption).
MAX_GANTT_ROWS = 64
_DPI = 110


@dataclass(frozen=True)
class AttemptBar:
    """One attempt: where and when it ran and how it ended."""

    trial: int
    attempt: int
    start_s: float
    end_s: float
    slots: tuple[int, ...]
    outcome: str
    from_epoch: int
    to_epoch: int


def attempts(events: Sequence[tuple[float, str, dict]]) -> list[AttemptBar]:
    """Every attempt of a trace, in start order."""
    open_: dict[tuple[int, int], tuple[float, dict]] = {}
    out: list[AttemptBar] = []
    end_t = max((t for t, _, _ in events), default=0.0)
    closing = {ev.TRIAL_END: None, ev.TRIAL_FAILED: "failed", ev.TRIAL_PREEMPTED: "preempted",
               ev.TRIAL_CANCELLED: "cancelled"}
    for t, kind, f in events:
        if kind == ev.TRIAL_START:
            open_[(f["trial"], f["attempt"])] = (t, f)
        elif kind in closing and f.get("attempt") is not None:
            got = open_.pop((f["trial"], f["attempt"]), None)
            if got is None:
                continue
            t0, fs = got
            outcome = closing[kind] or f.get("status", "completed")
            out.append(AttemptBar(fs["trial"], fs["attempt"], t0, t, tuple(fs.get("slots", ())),
                                  outcome, fs["from_epoch"], fs["to_epoch"]))
    for t0, fs in open_.values():
        out.append(AttemptBar(fs["trial"], fs["attempt"], t0, end_t, tuple(fs.get("slots", ())),
                              "running", fs["from_epoch"], fs["to_epoch"]))
    return sorted(out, key=lambda a: (a.start_s, a.trial, a.attempt))


def utilisation_curve(bars: Sequence[AttemptBar]) -> list[tuple[float, int]]:
    """(time, busy slots from then on) at every change."""
    deltas: dict[float, int] = {}
    for b in bars:
        deltas[b.start_s] = deltas.get(b.start_s, 0) + len(b.slots)
        deltas[b.end_s] = deltas.get(b.end_s, 0) - len(b.slots)
    out, busy = [], 0
    for t in sorted(deltas):
        busy += deltas[t]
        out.append((t, busy))
    return out


# ---------------------------------------------------------------------- plots

def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _axis(seconds: float) -> tuple[float, str]:
    for div, name in ((86400.0, "days"), (3600.0, "hours"), (60.0, "minutes")):
        if seconds >= 2 * div:
            return div, name
    return 1.0, "seconds"


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI, metadata={"Software": None})
    _plt().close(fig)


def gantt(path: Path, bars: Sequence[AttemptBar], slots: int, title: str) -> None:
    """Trials on workers: one row per GPU slot, one bar per attempt, coloured by outcome."""
    from matplotlib.patches import Patch
    plt = _plt()
    rows = min(max(slots, 1), MAX_GANTT_ROWS)
    span = max((b.end_s for b in bars), default=1.0)
    div, unit = _axis(span)
    fig, ax = plt.subplots(figsize=(11, min(1.6 + 0.28 * rows, 14)))
    per_row: dict[int, dict[str, list]] = {}
    for b in bars:
        for s in b.slots:
            if s < rows:
                per_row.setdefault(s, {}).setdefault(b.outcome, []).append(
                    (b.start_s / div, (b.end_s - b.start_s) / div))
    for s, by in per_row.items():
        for outcome, spans in by.items():
            ax.broken_barh(spans, (s - 0.4, 0.8), facecolors=OUTCOMES[outcome],
                           edgecolors="white", linewidth=0.3)
    if len(bars) <= 60:
        for b in bars:
            for s in b.slots[:1]:
                if s < rows and (b.end_s - b.start_s) / span > 0.03:
                    ax.text((b.start_s + b.end_s) / 2 / div, s, str(b.trial), ha="center",
                            va="center", fontsize=7, color="white")
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_yticks(range(0, rows, max(1, rows // 16)))
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("GPU slot (worker)")
    ax.set_title(title, loc="left")
    used = sorted({b.outcome for b in bars}, key=list(OUTCOMES).index)
    ax.legend(handles=[Patch(color=OUTCOMES[o], label=o) for o in used], loc="lower right",
              bbox_to_anchor=(1.0, 1.0), fontsize=8, ncol=len(used), frameon=False)
    _save(fig, path)


def utilisation_plot(path: Path, curve: Sequence[tuple[float, int]], slots: int,
                     makespan_s: float, title: str) -> None:
    plt = _plt()
    div, unit = _axis(makespan_s or 1.0)
    fig, ax = plt.subplots(figsize=(9, 3.6))
    if curve:
        xs = [t / div for t, _ in curve] + [makespan_s / div]
        ys = [100.0 * b / max(slots, 1) for _, b in curve]
        ax.stairs(ys, xs, fill=True, color="#3B75AF", alpha=0.7)
    ax.set_ylim(0, 105)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("busy GPU slots (%)")
    ax.set_title(title)
    _save(fig, path)


def best_plot(path: Path, summary: HpoSummary, metric: str, mode: str, title: str) -> None:
    """The running best of the named metric (see :mod:`testbed.app.hpo.best`): a step
    curve that only falls (``min``) or only rises (``max``), the better way marked."""
    plt = _plt()
    div, unit = _axis(summary.makespan_s or 1.0)
    fig, ax = plt.subplots(figsize=(9, 3.6))
    pts = summary.best_so_far
    if pts:
        xs = [t / div for t, _, _ in pts] + [summary.makespan_s / div]
        ys = [v for _, v, _ in pts] + [pts[-1][1]]
        ax.step(xs, ys, where="post", color="#4C9F70")
        ax.plot(xs[:-1], ys[:-1], "o", color="#4C9F70", markersize=3)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel(f"best {metric} so far ({'lower' if mode == 'min' else 'higher'} "
                  "is better)")
    ax.set_title(title)
    _save(fig, path)


# ---------------------------------------------------------------------- report

def _load(source: str, seed: int | None):
    """(events, title, metric name, mode) of a trace file or a simulated scenario."""
    if source.endswith(".jsonl"):
        from testbed.io.read import read_jsonl
        events = parse_trace(read_jsonl(source), source=source)
        head = next((f for _, k, f in events if k == ev.JOB_START), {})
        return events, f"HPO trace {Path(source).name}", head.get("metric", "value"), \
            head.get("mode", "min")
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.resolve import hpo_plan
    from testbed.scenario.schema import load_scenario
    sc = load_scenario(source)
    plan = hpo_plan(sc, seed=seed)
    run = simulate_hpo(plan)
    return list(run.events), f"HPO sweep {sc.name} (simulated, seed {plan.seed})", \
        plan.spec.metric.name, plan.spec.metric.mode


def write_hpo_report(source: str, out_dir: str, *, seed: int | None = None) -> ReportFiles:
    """Write ``index.html``, three PNG plots and two CSV files into ``out_dir``."""
    from testbed.app.report.common import check_report_target
    check_report_target(out_dir)
    events, title, metric, mode = _load(source, seed)
    summary = summarise(events, mode=mode)
    bars = attempts(events)
    curve = utilisation_curve(bars)
    with report_folder(out_dir) as (tmp, final):
        gantt(tmp / "gantt.png", bars, summary.slots, "Trials on workers")
        utilisation_plot(tmp / "utilisation.png", curve, summary.slots, summary.makespan_s,
                         "Utilisation over time")
        best_plot(tmp / "best_so_far.png", summary, metric, mode,
                  f"Best {metric} found against time")
        write_csv(tmp / "attempts.csv", ["trial", "attempt", "start_s", "end_s", "slots",
                                         "outcome", "from_epoch", "to_epoch"],
                  [(b.trial, b.attempt, b.start_s, b.end_s, " ".join(map(str, b.slots)),
                    b.outcome, b.from_epoch, b.to_epoch) for b in bars])
        write_csv(tmp / "best_so_far.csv", ["t_s", "value", "trial"],
                  [list(p) for p in summary.best_so_far])
        page = Page(title, f"{summary.trials} trials on {summary.slots} GPU slot(s); "
                           f"makespan {format_duration(summary.makespan_s)}.")
        page.table(["figure", "value"], _rows(summary, metric, mode))
        page.figure("gantt.png", "Trials on workers (one row per GPU slot; colour: how the "
                    "attempt ended)", "gantt")
        page.figure("utilisation.png", "Share of GPU slots busy over time", "utilisation")
        page.figure("best_so_far.png", f"Best {metric} reported so far — the "
                    f"{'lowest' if mode == 'min' else 'highest'} value of any epoch of any "
                    f"trial up to each time, so it only "
                    f"{'falls' if mode == 'min' else 'rises'}", "best_so_far")
        page.files(["attempts.csv", "best_so_far.csv"])
        write_text(tmp / "index.html", page.render())
    plots = tuple(final / n for n in ("gantt.png", "utilisation.png", "best_so_far.png"))
    return ReportFiles(final, final / "index.html", plots,
                       (final / "attempts.csv", final / "best_so_far.csv"))


def _rows(s: HpoSummary, metric: str = "value", mode: str = "min") -> list[tuple[str, str]]:
    rows = [("metric", f"{metric} ({mode})"), ("makespan", format_duration(s.makespan_s)),
            ("utilisation", f"{100 * s.utilisation:.1f}%"),
            ("idle slot-time", format_duration(s.idle_slot_s)),
            ("lost to failures", format_duration(s.lost_to_failures_s)),
            ("retries", str(s.retries)), ("preemptions", str(s.preemptions)),
            ("trials completed / failed / cancelled",
             f"{s.trials_completed} / {s.trials_failed} / {s.trials_cancelled}")]
    if s.best_trial is not None:
        word = "lowest" if mode == "min" else "highest"
        rows.append((f"best {metric} ({word} of any epoch)",
                     f"{s.best_value:.4g}: trial {s.best_trial} at "
                     f"{format_duration(s.best_t_s or 0.0)}"))
    return rows
