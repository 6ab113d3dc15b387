"""What every study figure shares: matplotlib's Agg back end (imported when a figure
is drawn), plain tick labels on log axes, and an atomic PNG write."""

from __future__ import annotations

from pathlib import Path

DPI = 110


def pyplot():
    """``matplotlib.pyplot`` on the Agg back end (no display needed)."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def plain_ticks():
    """A tick formatter that writes 4, 16, 0.5 instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _pos: f"{v:g}")


def save_png(fig, path: Path) -> None:
    """Lay out, write ``path`` atomically, close the figure."""
    from testbed.io.write import atomic_write
    fig.tight_layout()
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=DPI,
                                              metadata={"Software": None}), binary=True)
    pyplot().close(fig)


def log_axis_ticks(axis, low: float, high: float) -> None:
    """Plain labels on a log axis: every major tick; minor ticks labelled where they
    fit — all of them within one decade, only the 2s and 5s within two, none beyond."""
    import math

    from matplotlib.ticker import FuncFormatter, NullFormatter
    axis.set_major_formatter(plain_ticks())
    span = high / low if low > 0 else math.inf
    if span > 100.0:
        axis.set_minor_formatter(NullFormatter())
        return

    def label(v: float, _pos) -> str:
        if v <= 0:
            return ""
        lead = v / 10 ** math.floor(math.log10(v) + 1e-9)
        keep = span <= 10.0 or any(abs(lead - k) < 1e-6 for k in (2.0, 5.0))
        return f"{v:g}" if keep else ""
    axis.set_minor_formatter(FuncFormatter(label))
