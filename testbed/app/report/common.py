"""Small pieces both reports share: the output folder protocol and number formats.

A report folder is written as a whole or not at all: :func:`report_folder` builds it
under a temporary name beside the target and renames it into place at the end. The
folder it replaces must be a previous testbed report (it carries a
:data:`MARKER` file) or empty, so a report never deletes a folder of the user's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from testbed.errors import InputError
from testbed.io.write import os_reason

#: File that marks a folder as written by ``testbed report``/``run`` (safe to replace).
MARKER = ".testbed-report"


@dataclass(frozen=True)
class ReportFiles:
    """What a report wrote: the folder, the HTML page, the plots and the data files."""

    out_dir: Path
    html: Path
    plots: tuple[Path, ...]
    data: tuple[Path, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"out_dir": str(self.out_dir), "html": str(self.html),
                "plots": [str(p) for p in self.plots], "data": [str(p) for p in self.data]}


def check_report_target(out_dir: str | Path, option: str = "-o") -> Path:
    """Refuse, before any work, a target the report cannot (or must not) replace."""
    out = Path(out_dir)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InputError("exists and is not a folder", source=str(out), field=option)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("the parent folder does not exist", source=str(out), field=option)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("the parent folder is not writable", source=str(out), field=option)
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError("is a folder that holds other files and no testbed report; choose "
                         "another folder", source=str(out), field=option)
    return out


@contextmanager
def report_folder(out_dir: str | Path, option: str = "-o") -> Iterator[tuple[Path, Path]]:
    """``(temporary folder, final folder)``: write into the first; on success it replaces
    the second in one rename (see the module docstring)."""
    final = check_report_target(out_dir, option)
    parent = final.parent if str(final.parent) else Path(".")
    try:
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{final.name}.tmp-"))
    except OSError as exc:
        raise InputError(f"cannot write: {os_reason(exc)}", source=str(final),
                         field=option) from None
    try:
        yield tmp, final
        (tmp / MARKER).write_text("written by testbed; this whole folder is replaced by "
                                  "the next report\n")
        os.chmod(tmp, 0o777 & ~_umask())
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(dir=parent, prefix=f".{final.name}.old-"))
            os.replace(final, old / "report")
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"cannot write the report: {os_reason(exc)}", source=str(final),
                         field=option) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


@dataclass(frozen=True)
class PairedDifference:
    """The difference of two ETTRs (Σ useful / Σ wall) measured on the same random
    numbers, replication by replication, with its 95% confidence interval."""

    difference: float
    ci95_low: float
    ci95_high: float
    pairs: int


def paired_ettr_difference(a: list[tuple[float, float]], b: list[tuple[float, float]]
                           ) -> PairedDifference:
    """ETTR(a) − ETTR(b) for replications paired by index (``(useful_s, wall_s)`` each).

    Common random numbers make the replications of two points alike, so the noise they
    share cancels in the difference: its interval is much narrower than either point's.
    The ETTR is a ratio of sums, so the interval uses the ratio's linearisation (the
    delta method, as the points' own intervals do): per pair
    ``z = (u_a − R_a w_a)/w̄_a − (u_b − R_b w_b)/w̄_b`` and a t interval on the mean of z.
    """
    from scipy import stats

    n = min(len(a), len(b))
    if n == 0:
        raise ValueError("no pairs")
    a, b = a[:n], b[:n]
    wa, wb = sum(w for _, w in a) / n, sum(w for _, w in b) / n
    ra = sum(u for u, _ in a) / (n * wa) if wa > 0 else 0.0
    rb = sum(u for u, _ in b) / (n * wb) if wb > 0 else 0.0
    z = [((ua - ra * w_a) / wa if wa > 0 else 0.0) - ((ub - rb * w_b) / wb if wb > 0 else 0.0)
         for (ua, w_a), (ub, w_b) in zip(a, b, strict=True)]
    diff = ra - rb
    if n < 2:
        return PairedDifference(diff, diff, diff, n)
    mean = sum(z) / n
    sd = (sum((v - mean) ** 2 for v in z) / (n - 1)) ** 0.5
    half = float(stats.t.ppf(0.975, n - 1)) * sd / n ** 0.5
    return PairedDifference(diff, diff - half, diff + half, n)
