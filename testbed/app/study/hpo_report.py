"""The HPO scaling study's tables, plot and output folder.

Tables are (headers, rows, alignment) of strings. The folder holds ``study.json``,
``points.csv`` (simulated), ``measured.csv``, ``summary.txt`` and ``scaling.png``:
makespan, speed-up and efficiency against nodes, one line per GPUs-per-trial, the
ideal speed-up and the point where trials run out marked; measured points beside.
"""

from __future__ import annotations

from pathlib import Path

from testbed.app.study.hpo_scaling import HpoScalingStudy
from testbed.app.study.plotting import log_axis_ticks, pyplot, save_png
from testbed.units import format_duration

Table = tuple[list[str], list[list[str]], str]


def _t(s: float | None) -> str:
    return "—" if s is None else format_duration(s)


def points_table(study: HpoScalingStudy) -> Table:
    headers = ["nodes", "GPUs/trial", "GPUs", "at once", "makespan", "lower bound",
               "closed form", "speed-up", "efficiency", "ETTR", "trials left?"]
    rows = [[str(p.nodes), str(p.gpus_per_trial), str(p.gpus), str(p.concurrent),
             _t(p.makespan_s), _t(p.lower_bound_s), _t(p.closed_form_s), f"{p.speedup:.2f}×",
             f"{p.efficiency:.3f}",
             f"{100 * p.utilisation:.1f}%",
             "yes" if p.concurrent <= p.parallelism else "run out"]
            for p in study.points]
    return headers, rows, "r" * 10 + "l"


def measured_table(study: HpoScalingStudy) -> Table:
    headers = ["workers", "trials", "makespan", "closed form", "mean trial", "speed-up",
               "efficiency", "load before", "CPUs"]
    rows = [[str(m.workers), str(m.trials), _t(m.makespan_s), _t(m.closed_form_s),
             _t(m.mean_trial_s), f"{m.speedup:.2f}×", f"{m.efficiency:.3f}",
             f"{m.load_before:.2f}", str(m.cpus)] for m in study.measured]
    return headers, rows, "r" * 9


def summary_text(study: HpoScalingStudy) -> str:
    from testbed.app.study.ckpt_tables import verdict_lines
    from testbed.app.study.oracle_tables import text_table as table
    lines = [f"{study.name} ({study.scenario}): {study.search} search, {study.scheduler}, "
             f"{study.gpus_per_node} GPU(s) per node; sweep {study.sweep_id}", "",
             table(*points_table(study)), ""]
    if study.measured:
        lines += [table(*measured_table(study)), ""]
    lines += verdict_lines(study.claims)
    lines += [f"note: {n}" for n in study.notes]
    return "\n".join(lines) + "\n"


def _plot(study: HpoScalingStudy, path: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.0))
    gs = sorted({p.gpus_per_trial for p in study.points})
    nodes = sorted({p.nodes for p in study.points})
    for g in gs:
        mine = [p for p in study.points if p.gpus_per_trial == g]
        xs = [p.nodes for p in mine]
        label = f"{g} GPU(s)/trial"
        line = axes[0].plot(xs, [p.makespan_s for p in mine], marker="o", label=label)[0]
        axes[0].plot(xs, [p.lower_bound_s for p in mine], ls=":", color=line.get_color())
        axes[1].plot(xs, [p.speedup for p in mine], marker="o", color=line.get_color(),
                     label=label)
        axes[2].plot(xs, [p.efficiency for p in mine], marker="o", color=line.get_color(),
                     label=label)
        out = [p for p in mine if p.concurrent > p.parallelism]
        if out:
            axes[1].axvline(out[0].nodes, color=line.get_color(), lw=0.8, ls="--")
    if nodes:
        lo, hi = min(nodes), max(nodes)
        axes[1].plot([lo, hi], [1, hi / lo], color="#888", ls="--", lw=1, label="linear")
    if study.measured:
        m = study.measured
        axes[1].plot([p.workers for p in m], [p.speedup for p in m], marker="s", color="k",
                     label="measured (workers on this machine)")
        axes[2].plot([p.workers for p in m], [p.efficiency for p in m], marker="s",
                     color="k", label="measured (workers)")
    axes[2].axhline(study.min_efficiency, color="#c00", lw=0.8, ls="--",
                    label=f"near-linear ≥ {study.min_efficiency:.2f}")
    titles = ("makespan (dotted: lower bound)", "speed-up (dashed: trials run out)",
              "efficiency")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log", base=2)
        if nodes:
            log_axis_ticks(ax.xaxis, min(nodes), max(nodes))
        ax.set_xlabel("nodes (measured: workers)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("makespan s")
    axes[1].set_ylabel("speed-up vs fewest nodes")
    axes[2].set_ylabel("speed-up · n₀ / n")
    axes[2].set_ylim(0, 1.1)
    fig.suptitle(f"{study.name}: {study.search} search, {study.scheduler}", fontsize=10)
    save_png(fig, path)
    return path


def draw_all(study: HpoScalingStudy, out: Path) -> list[Path]:
    return [_plot(study, out / "scaling.png")] if study.points else []


def write_hpo_scaling_outputs(study: HpoScalingStudy, out_dir: str | Path):
    from testbed.app.study.outputs import write_outputs
    return write_outputs(out_dir, study, {"points": study.points, "measured": study.measured},
                         draw_all, summary_text(study))
