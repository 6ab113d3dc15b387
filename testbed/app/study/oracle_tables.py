"""The oracle study's text tables and output folder.

Tables are (headers, rows, alignment) of strings: accuracies in percent with their
Student-t 95% interval, fitted and held-out rows in separate blocks. The output folder
(:func:`write_oracle_outputs`) holds ``study.json``, ``rows.csv`` (every scored
prediction), ``groups.csv`` (every group), ``summary.txt`` and the plots of
:mod:`testbed.app.study.oracle_plots`.
"""

from __future__ import annotations

from pathlib import Path

from testbed.app.study.oracle import FITTED, HELD_OUT, OracleGroup, OracleStudy

#: (headers, rows, alignment: one 'l' or 'r' per column)
Table = tuple[list[str], list[list[str]], str]
#: Training groups in the order the table shows them.
TRAINING_BY = ("all", "strategy", "model", "model×strategy")


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def _row(g: OracleGroup) -> list[str]:
    ci = "—" if g.n < 2 else f"[{_pct(g.ci95_low)}, {_pct(g.ci95_high)}]"
    rho = "—" if g.rank_correlation is None else f"{g.rank_correlation:.3f}"
    return [g.split, g.by, g.name, str(g.n), _pct(g.accuracy), ci, _pct(g.accuracy_rel),
            f"{g.mape_pct:.1f}", _pct(g.worst_accuracy), rho]


HEADERS = ["split", "by", "group", "n", "accuracy %", "95% CI", "1−|err| %", "MAPE %",
           "worst %", "rank ρ"]


def accuracy_table(study: OracleStudy, *, detail: bool = True) -> Table:
    """Training rows: all, per strategy, per model (and model × strategy), per split."""
    bys = TRAINING_BY if detail else TRAINING_BY[:3]
    rows = [_row(g) for split in (FITTED, HELD_OUT) for by in bys
            for g in study.training_groups(split, by)]
    return HEADERS, rows, "lll" + "r" * 7


def other_table(study: OracleStudy) -> Table:
    """The other quantities the profile predicts (collectives, checkpoints, runs)."""
    rows = [_row(g) for split in (FITTED, HELD_OUT)
            for g in study.training_groups(split, "quantity")]
    return HEADERS, rows, "lll" + "r" * 7


def worst_table(study: OracleStudy, k: int = 5) -> Table:
    """The held-out training predictions furthest from their measurement."""
    held = sorted((r for r in study.rows if r.split == HELD_OUT and r.training),
                  key=lambda r: (r.accuracy, r.file, r.line))[:k]
    rows = [[r.label, f"{Path(r.file).name}:{r.line}", f"{r.measured_s:.4g}",
             f"{r.predicted_s:.4g}", _pct(r.accuracy), r.basis] for r in held]
    return (["held-out run", "record", "measured s", "predicted s", "accuracy %", "predicted by"],
            rows, "llrrrl")


def text_table(headers: list[str], rows: list[list[str]], align: str) -> str:
    """A plain-text table for the summary file (the study layer sits below the CLI,
    whose ``table`` prints the same layout)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(row, widths, align, strict=True)).rstrip()
    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths), *map(fmt, rows)])


def summary_text(study: OracleStudy) -> str:
    from testbed.app.study.ckpt_tables import verdict_lines
    table = text_table
    lines = [f"profile {study.profile}, {study.records} record(s), {len(study.rows)} "
             f"prediction(s), {study.not_covered} record(s) not covered; fit set: "
             f"{study.fit_set}; hold-out {study.holdout}",
             "metric: ParaDL's accuracy, mean of min(pred, meas)/max(pred, meas)", "",
             table(*accuracy_table(study)), ""]
    if any(g.by == "quantity" for g in study.groups):
        lines += [table(*other_table(study)), ""]
    lines += verdict_lines(study.claims)
    lines += [f"note: {n}" for n in study.notes]
    return "\n".join(lines) + "\n"


def write_oracle_outputs(study: OracleStudy, out_dir: str | Path):
    """The study's folder (see the module doc); its :class:`ReportFiles`."""
    from testbed.app.study.oracle_plots import draw_all
    from testbed.app.study.outputs import write_outputs
    return write_outputs(out_dir, study, {"rows": study.rows, "groups": study.groups},
                         draw_all, summary_text(study))
