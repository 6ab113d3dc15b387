"""A study's output folder: its JSON, one CSV per table, its PNG plots.

Written as a whole through the report's folder protocol
(:func:`testbed.app.report.common.report_folder`: a temporary folder renamed into
place, replacing only an earlier testbed output folder).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.app.report.common import ReportFiles, report_folder
from testbed.io.write import write_csv, write_json, write_text


def rows_csv(path: Path, rows: Sequence[Any]) -> Path:
    """One CSV line per typed row (its ``to_dict()``; columns in field order, the union
    over the rows, empty where a row has none)."""
    dicts = [r.to_dict() for r in rows]
    header = list(dict.fromkeys(k for d in dicts for k in d))
    return write_csv(path, header, [["" if d.get(k) is None else d[k] for k in header]
                                    for d in dicts])


def write_outputs(out_dir: str | Path, study: Any, tables: Mapping[str, Sequence[Any]],
                  draw: Callable[[Any, Path], Sequence[Path]], summary: str) -> ReportFiles:
    """``study.json``, ``<name>.csv`` per table, the plots ``draw`` makes, ``summary.txt``."""
    with report_folder(out_dir) as (tmp, final):
        data = [write_json(tmp / "study.json", study.to_dict())]
        data += [rows_csv(tmp / f"{name}.csv", rows) for name, rows in tables.items() if rows]
        data.append(write_text(tmp / "summary.txt", summary))
        plots = list(draw(study, tmp))
    rel = [p.relative_to(tmp) for p in plots]
    return ReportFiles(out_dir=final, html=final / "summary.txt",
                       plots=tuple(final / p for p in rel),
                       data=tuple(final / p.relative_to(tmp) for p in data))


def write_checkpoint_outputs(study, out_dir: str | Path) -> ReportFiles:
    from testbed.app.study.ckpt_plots import draw_all
    from testbed.app.study.ckpt_tables import verdict_lines
    summary = "\n".join([*verdict_lines(study.claims), "", *[f.text for f in study.findings],
                         "", *[f"- {a}" for a in study.advice]]) + "\n"
    return write_outputs(out_dir, study, {"formats": study.formats, "scaling": study.scaling,
                                          "oracle": study.oracle, "restarts": study.restarts},
                         draw_all, summary)


def precision_rows(study) -> dict[str, list[dict]]:
    """Flat CSV tables of a precision study: precisions, baselines, curves."""
    precisions, baselines, curves = [], [], []
    for t in study.tasks:
        for s in t.precisions:
            d = s.to_dict()
            precisions.append(_flat({"task": t.task, **d}))
        for b in t.baselines:
            baselines.append(_flat({"task": t.task, **b.to_dict()}))
        for c in t.curves:
            for i, epoch in enumerate(c.epochs):
                curves.append({"task": t.task, "precision": c.precision, "epoch": epoch,
                               "train_loss": c.train_loss[i],
                               "accuracy": c.accuracy[i] if c.accuracy else None,
                               "mae": c.mae[i] if c.mae else None})
    return {"precisions": precisions, "baselines": baselines, "curves": curves}


def _flat(d: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


class _Row:
    def __init__(self, data: dict) -> None:
        self.data = data

    def to_dict(self) -> dict:
        return self.data


def write_precision_outputs(study, out_dir: str | Path) -> ReportFiles:
    from testbed.app.study.ckpt_tables import verdict_lines
    from testbed.app.study.prec_plots import draw_all
    lines = verdict_lines(study.claims)
    for t in study.tasks:
        lines += ["", f"{t.task}:", *[f"  {d}" for d in t.disclosures]]
    tables = {name: [_Row(r) for r in rows] for name, rows in precision_rows(study).items()}
    return write_outputs(out_dir, study, tables, draw_all, "\n".join(lines) + "\n")
