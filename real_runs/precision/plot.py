"""The study's plot: accuracy (and MAE) against bits per stored value.

k-bit quantisation (int2…int16) is one line with error bars (± one standard deviation
over seeds), mantissa truncation another, the float formats labelled points; the fp64
baseline and the no-skill forecast are horizontal lines, so the bit width where
accuracy breaks down is where the int line leaves the baseline. Matplotlib's Agg
back end (no display); the PNG is written atomically through :mod:`testbed.io.write`.
"""

from __future__ import annotations

from pathlib import Path

from real_runs.precision.study import StudyResult
from testbed.io.write import atomic_write

_DPI = 110
_COLOURS = {"int": "#3B75AF", "mant": "#8E7DBE", "float": "#D1495B",
            "baseline": "#333333", "climatology": "#EDAE49"}


def _metrics(result: StudyResult) -> list[tuple[str, str, float, float | None]]:
    """(attribute, axis label, scale, no-skill value) for each metric the task has."""
    out = []
    if result.baseline.accuracy_mean is not None:
        out.append(("accuracy", "test accuracy (%)", 100.0,
                    None if result.climatology.accuracy is None
                    else 100.0 * result.climatology.accuracy))
    if result.baseline.mae_mean is not None:
        out.append(("mae", f"test MAE ({result.target})", 1.0, result.climatology.mae))
    return out


def _draw(ax, result: StudyResult, metric: str, label: str, scale: float,
          no_skill: float | None) -> None:
    for kind, name in (("int", "k-bit quantisation (intK)"), ("mant", "mantissa truncation")):
        rows = sorted((r for r in result.results if r.kind == kind),
                      key=lambda r: r.bits_per_value)
        if rows:
            ax.errorbar([r.bits_per_value for r in rows],
                        [scale * getattr(r, f"{metric}_mean") for r in rows],
                        yerr=[scale * getattr(r, f"{metric}_std") for r in rows],
                        marker="o", ms=4, capsize=3, color=_COLOURS[kind], label=name)
    for r in (r for r in result.results if r.kind == "float"):
        y = scale * getattr(r, f"{metric}_mean")
        ax.errorbar([r.bits_per_value], [y], yerr=[scale * getattr(r, f"{metric}_std")],
                    marker="s", ms=5, capsize=3, color=_COLOURS["float"], linestyle="none")
        ax.annotate(r.precision, (r.bits_per_value, y), textcoords="offset points",
                    xytext=(4, 4), fontsize=8)
    base = scale * getattr(result.baseline, f"{metric}_mean")
    ax.axhline(base, color=_COLOURS["baseline"], linestyle="--", linewidth=1,
               label="fp64 baseline")
    if no_skill is not None:
        ax.axhline(no_skill, color=_COLOURS["climatology"], linestyle=":", linewidth=1.5,
                   label="no-skill forecast")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bits per stored input value")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)


def plot_study(result: StudyResult, path: str | Path) -> Path:
    """Draw the study and write the PNG to ``path`` atomically."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    metrics = _metrics(result)
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4), squeeze=False)
    for ax, (metric, label, scale, no_skill) in zip(axes[0], metrics, strict=True):
        _draw(ax, result, metric, label, scale, no_skill)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{result.dataset}: inputs stored at reduced precision "
                 f"({result.framework}, {len(result.seeds)} seeds)", fontsize=10)
    fig.tight_layout()
    try:
        atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=_DPI,
                                                  metadata={"Software": None}),
                     binary=True, field="--plot")
    finally:
        plt.close(fig)
    return Path(path)
