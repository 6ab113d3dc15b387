"""The precision study's figures (matplotlib, Agg, imported when drawing).

* ``paired.png`` — per task, each precision's paired accuracy change from fp64 with its
  95% interval, the claim's tolerance as a line and the region it allows shaded: the
  figure the verdict is read from;
* ``accuracy-<task>.png`` — accuracy (and MAE) against bits per stored value with
  intervals, the fp64 network and every baseline as lines;
* ``curves-<task>.png`` — learning curves per precision: test accuracy (or MAE) and
  training loss against epoch, the mean over seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from testbed.app.study.plotting import log_axis_ticks, plain_ticks, pyplot, save_png
from testbed.app.study.prec_results import PrecisionStudy, TaskResult

VERDICT_COLOURS = {"supported": "#4C9F70", "undecided": "#EDAE49", "contradicted": "#D1495B"}
KIND_COLOURS = {"int": "#3B75AF", "mant": "#8E7DBE", "float": "#D1495B"}
BASELINE_STYLES = (":", "-.", (0, (5, 2)), (0, (1, 3)))


def paired_plot(study: PrecisionStudy, path: Path) -> None:
    plt = pyplot()
    tasks = [t for t in study.tasks if t.precisions[0].change_pp is not None]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.8 * len(tasks), 4.2), squeeze=False)
    tol = study.tolerance_pp
    for ax, task in zip(axes[0], tasks, strict=True):
        stats = [s for s in task.precisions if s.precision != "fp64"]
        x = list(range(len(stats)))
        for i, s in zip(x, stats, strict=True):
            d = s.change_pp.difference if s.change_pp else None
            if d is None:
                continue
            colour = VERDICT_COLOURS[s.within_tolerance] if task.has_skill else "#999999"
            ax.errorbar([i], [d.mean], yerr=[[d.mean - d.low], [d.high - d.mean]], fmt="o",
                        capsize=4, color=colour, mec="black" if s.in_claim else None,
                        mfc=colour if task.has_skill else "white")
        lows = [s.change_pp.difference.low for s in stats if s.change_pp]
        bottom = min([-1.5 * tol, *lows]) - 0.5
        ax.axhspan(-tol, max(tol, *[s.change_pp.difference.high for s in stats
                                    if s.change_pp]) + 0.5, color="#4C9F70", alpha=0.08)
        ax.axhline(-tol, color="#D1495B", ls="--", lw=1, label=f"claim: loss < {tol:g} pp")
        ax.axhline(0, color="#333333", lw=0.8)
        ax.set_ylim(bottom=bottom)
        ax.set_xticks(x, [s.precision + ("*" if s.in_claim else "") for s in stats],
                      rotation=30)
        ax.set_ylabel("accuracy change from fp64 inputs (pp)")
        skill = ("has skill" if task.has_skill else
                 f"no skill over {task.best_baseline.split(':')[0]}: grey, not judged")
        ax.set_title(f"{task.task}: {task.verdict.verdict} ({skill})", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(f"Paired change from fp64 inputs, 95% intervals (* claimed; colour: "
                 f"within {tol:g} pp supported / undecided / contradicted)", fontsize=9)
    save_png(fig, path)


def _metric_axes(task: TaskResult):
    out = []
    if task.precisions[0].accuracy is not None:
        out.append(("accuracy", "test accuracy (%)", 100.0))
    if task.precisions[0].mae is not None:
        out.append(("mae", f"test MAE ({task.target})", 1.0))
    return out


def accuracy_plot(task: TaskResult, path: Path) -> None:
    plt = pyplot()
    metrics = _metric_axes(task)
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.8 * len(metrics), 4.2), squeeze=False)
    for ax, (attr, label, scale) in zip(axes[0], metrics, strict=True):
        for kind, name in (("int", "k-bit quantisation"), ("mant", "mantissa truncation"),
                           ("float", "float formats")):
            rows = sorted((s for s in task.precisions if s.kind == kind
                           and getattr(s, attr) is not None), key=lambda s: s.bits_per_value)
            if not rows:
                continue
            ivs = [getattr(s, attr) for s in rows]
            ax.errorbar([s.bits_per_value for s in rows], [scale * v.mean for v in ivs],
                        yerr=[[scale * (v.mean - v.low) for v in ivs],
                              [scale * (v.high - v.mean) for v in ivs]],
                        marker="o" if kind != "float" else "s", ms=4, capsize=3,
                        ls="-" if kind != "float" else "none", color=KIND_COLOURS[kind],
                        label=name)
        for style, b in zip(BASELINE_STYLES, task.baselines, strict=False):
            value = getattr(b, attr)
            if value is not None:
                ax.axhline(scale * value.mean, ls=style, color="#777777", lw=1.2,
                           label=b.name.split(" (")[0].split(":")[0])
        ax.set_xscale("log", base=2)
        ax.get_xaxis().set_major_formatter(plain_ticks())
        ax.set_xlabel("bits per stored input value")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{task.task}: inputs stored at reduced precision ({task.framework}, "
                 f"{len(task.seeds)} seeds, 95% intervals)", fontsize=10)
    save_png(fig, path)


def curves_plot(task: TaskResult, path: Path) -> None:
    plt = pyplot()
    fig, (ax, lax) = plt.subplots(1, 2, figsize=(11, 4.2))
    cmap = plt.get_cmap("viridis")
    for i, c in enumerate(task.curves):
        colour = "black" if c.precision == "fp64" else cmap(i / max(1, len(task.curves) - 1))
        metric = c.accuracy if c.accuracy is not None else c.mae
        scale = 100.0 if c.accuracy is not None else 1.0
        ax.plot(c.epochs, [scale * v for v in metric or ()], color=colour, lw=1.2,
                label=c.precision)
        lax.plot(c.epochs, c.train_loss, color=colour, lw=1.2, label=c.precision)
    _curve_baselines(ax, task)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy (%)" if task.curves and task.curves[0].accuracy is not None
                  else f"test MAE ({task.target})")
    lax.set_xlabel("epoch")
    lax.set_ylabel("training loss (mean over the epoch)")
    lax.set_yscale("log")
    losses = [v for c in task.curves for v in c.train_loss if v > 0]
    if losses:
        log_axis_ticks(lax.get_yaxis(), min(losses), max(losses))
    for a in (ax, lax):
        a.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{task.task}: learning curves per input precision (mean of "
                 f"{len(task.seeds)} seed{'s' if len(task.seeds) > 1 else ''}; the test set "
                 "is only watched, never used to choose)", fontsize=10)
    save_png(fig, path)


def _curve_baselines(ax, task: TaskResult) -> None:
    """The baselines as lines where they fall near the curves; the others named in the
    legend with their value (so the axis stays on the curves)."""
    if not task.curves or task.curves[0].accuracy is None:
        return
    low = min(min(c.accuracy or (1.0,)) for c in task.curves) * 100
    bottom = max(0.0, low - 3.0)
    for style, b in zip(BASELINE_STYLES, task.baselines, strict=False):
        if b.accuracy is None:
            continue
        name = b.name.split(" (")[0].split(":")[0]
        value = 100 * b.accuracy.mean
        if value >= bottom:
            ax.axhline(value, ls=style, color="#777777", lw=1, label=name)
        else:
            ax.plot([], [], ls="none", label=f"{name}: {value:.1f}% (below the axis)")
    ax.set_ylim(bottom=bottom)


def draw_all(study: PrecisionStudy, folder: Path) -> Sequence[Path]:
    out = []
    if any(t.precisions[0].change_pp is not None for t in study.tasks):
        paired_plot(study, folder / "paired.png")
        out.append(folder / "paired.png")
    for task in study.tasks:
        accuracy_plot(task, folder / f"accuracy-{task.task}.png")
        out.append(folder / f"accuracy-{task.task}.png")
        if task.curves:
            curves_plot(task, folder / f"curves-{task.task}.png")
            out.append(folder / f"curves-{task.task}.png")
    return out
