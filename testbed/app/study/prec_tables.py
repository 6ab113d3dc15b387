"""The precision study's tables for people: (headers, rows, alignment) per task."""

from __future__ import annotations

from testbed.app.study.prec_results import TaskResult
from testbed.precision.inference import Interval, PairedTest

Table = tuple[list[str], list[list[str]], str]


def pct(iv: Interval | None) -> str:
    return "—" if iv is None else f"{100 * iv.mean:.2f} [{100 * iv.low:.2f}, {100 * iv.high:.2f}]"


def num(iv: Interval | None) -> str:
    return "—" if iv is None else f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def change(test: PairedTest | None, digits: int = 2) -> str:
    if test is None:
        return "—"
    d = test.difference
    return f"{d.mean:+.{digits}f} [{d.low:+.{digits}f}, {d.high:+.{digits}f}]"


def p_value(test: PairedTest | None) -> str:
    return "—" if test is None else f"{test.p_value:.3g}"


def baselines_table(task: TaskResult) -> Table:
    headers = ["forecast", "accuracy % [95% CI]", "MAE [95% CI]"]
    rows = [[b.name, pct(b.accuracy), num(b.mae)] for b in task.baselines]
    fp64 = task.precisions[0]
    rows.append([f"network, fp64 inputs ({len(task.seeds)} seeds)", pct(fp64.accuracy),
                 num(fp64.mae)])
    return headers, rows, "lrr"


def precisions_table(task: TaskResult, tolerance_pp: float) -> Table:
    has_acc = task.precisions[0].accuracy is not None
    has_mae = task.precisions[0].mae is not None
    headers = ["precision", "bytes/value", "max abs err"]
    if has_acc:
        headers += ["accuracy % [95% CI]", "Δ pp vs fp64 [95% CI]", "p", f"within {tolerance_pp:g} pp"]
    if has_mae:
        headers += ["MAE [95% CI]", "Δ MAE"]
    rows = []
    for s in task.precisions:
        row = [s.precision + (" *" if s.in_claim else ""), f"{s.bytes_per_value:g}",
               f"{s.max_abs_error:.3g}"]
        if has_acc:
            row += [pct(s.accuracy), change(s.change_pp), p_value(s.change_pp),
                    "—" if s.precision == "fp64" else s.within_tolerance]
        if has_mae:
            row += [num(s.mae), change(s.mae_change, 3)]
        rows.append(row)
    return headers, rows, "l" + "r" * (len(headers) - 1)
