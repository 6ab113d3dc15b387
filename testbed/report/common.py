"""Small pieces both reports share: atomic file writes, CSV, the output folder."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testbed.errors import InputError


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


def prepare_dir(out_dir: str | Path, option: str = "-o") -> Path:
    """Create the report folder (its parent must exist)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", source=str(out), field=option)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("parent folder does not exist", source=str(out), field=option)
    out.mkdir(exist_ok=True)
    return out


def write_text(path: Path, text: str) -> None:
    """Write through a temporary file and rename: never half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"
