"""The oracle study's figures.

* ``predicted_vs_measured.png`` — one log-log panel per strategy, predicted against
  measured seconds, fitted rows hollow and held-out rows filled, one colour per model;
  the diagonal and the band where ParaDL's accuracy is at least the study's target
  (``meas·a ≤ pred ≤ meas/a``);
* ``accuracy_by_group.png`` — mean accuracy with its 95% interval per strategy and per
  model, fitted and held out side by side, the target drawn across.
"""

from __future__ import annotations

import math
from pathlib import Path

from testbed.app.study.oracle import FITTED, HELD_OUT, OracleStudy
from testbed.app.study.plotting import log_axis_ticks, pyplot, save_png

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def _scatter(study: OracleStudy, path: Path) -> Path:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    plt = pyplot()
    rows = [r for r in study.rows if r.training]
    strategies = sorted({r.strategy for r in rows})
    models = sorted({r.model for r in rows})
    colour = {m: COLOURS[i % len(COLOURS)] for i, m in enumerate(models)}
    marker = {m: "osD^v<>"[i // len(COLOURS) % 7] for i, m in enumerate(models)}
    cols = 2 if len(strategies) == 4 else min(len(strategies), 3)
    nrows = math.ceil(len(strategies) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.9 * cols + 2.4, 3.8 * nrows),
                             squeeze=False)
    a = study.target
    for ax, strategy in zip(axes.flat, strategies, strict=False):
        mine = [r for r in rows if r.strategy == strategy]
        values = [v for r in mine for v in (r.measured_s, r.predicted_s)]
        lo, hi = min(values) / 1.6, max(values) * 1.6
        ax.fill_between([lo, hi], [lo * a, hi * a], [lo / a, hi / a], color="#ddd")
        ax.plot([lo, hi], [lo, hi], color="#888", lw=1, ls="--")
        for model in models:
            for split, face in ((FITTED, "none"), (HELD_OUT, colour[model])):
                pts = [r for r in mine if r.model == model and r.split == split]
                if pts:
                    ax.scatter([r.measured_s for r in pts], [r.predicted_s for r in pts],
                               s=30, marker=marker[model], facecolors=face,
                               edgecolors=colour[model])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        log_axis_ticks(ax.xaxis, lo, hi)
        log_axis_ticks(ax.yaxis, lo, hi)
        ax.set_title(f"{strategy} ({len(mine)} runs)", fontsize=9)
        ax.set_xlabel("measured s / step")
        ax.set_ylabel("predicted s / step")
    for ax in list(axes.flat)[len(strategies):]:
        ax.set_visible(False)
    handles: list = [Line2D([], [], ls="", marker=marker[m], color=colour[m], label=m)
                     for m in models]
    handles += [Line2D([], [], ls="", marker="o", mfc="none", mec="k", label="fitted"),
                Line2D([], [], ls="", marker="o", color="k", label="held out"),
                Patch(color="#ddd", label=f"accuracy ≥ {100 * a:.2f}%")]
    how = ("profile's fit set" if not any(r.basis.startswith("refit") for r in rows)
           else study.holdout)
    fig.suptitle(f"Oracle vs measurement ({study.mode} mode; held out: {how})", fontsize=9)
    right = 1 - (2.4 if len(handles) <= 16 else 3.6) / fig.get_figwidth()
    fig.tight_layout(rect=(0, 0, right, 1))
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(right, 0.5), fontsize=7,
               frameon=False, ncol=1 if len(handles) <= 16 else 2)
    _save_as_laid_out(fig, path)
    return path


def _save_as_laid_out(fig, path: Path) -> None:
    """Write the PNG keeping this figure's layout (room for the legend on the right)."""
    from testbed.app.study.plotting import DPI
    from testbed.io.write import atomic_write
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=DPI,
                                              metadata={"Software": None}), binary=True)
    pyplot().close(fig)


def _bars(study: OracleStudy, path: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), squeeze=False)
    for ax, by in zip(axes.flat, ("strategy", "model"), strict=True):
        names = sorted({g.name for g in study.groups if g.by == by})
        width = 0.38
        counts = {n: ["0", "0"] for n in names}
        for k, (split, colour) in enumerate(((FITTED, "#9ecae1"), (HELD_OUT, "#3182bd"))):
            got = {g.name: g for g in study.training_groups(split, by)}
            for n, g in got.items():
                counts[n][k] = str(g.n)
            xs = [i + (k - 0.5) * width for i, n in enumerate(names) if n in got]
            gs = [got[n] for n in names if n in got]
            if not gs:
                continue
            ax.bar(xs, [100 * g.accuracy for g in gs], width, color=colour,
                   label=split, yerr=[[100 * (g.accuracy - g.ci95_low) for g in gs],
                                      [100 * (g.ci95_high - g.accuracy) for g in gs]],
                   capsize=2, ecolor="#444")
        ax.axhline(100 * study.target, color="#c00", lw=1, ls="--",
                   label=f"study's {100 * study.target:.2f}%")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([f"{n}\nn = {counts[n][0]} / {counts[n][1]}" for n in names],
                           fontsize=7)
        ax.set_ylim(0, 105)
        ax.set_ylabel("mean accuracy % (min/max), 95% CI")
        ax.set_title(f"per {by} (n = fitted / held out)", fontsize=9)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3,
                  frameon=False)
    save_png(fig, path)
    return path


def draw_all(study: OracleStudy, out: Path) -> list[Path]:
    """Every figure of the study into ``out``."""
    if not any(r.training for r in study.rows):
        return []
    return [_scatter(study, out / "predicted_vs_measured.png"),
            _bars(study, out / "accuracy_by_group.png")]
