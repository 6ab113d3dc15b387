"""``testbed precision-study``: how much accuracy reduced-precision inputs cost.

Trains the same small float32 MLP on inputs stored at each precision (fp64, fp32,
fp16, bf16, intK, mantM) and reports accuracy (and MAE) mean ± standard deviation over
seeds, the change from fp64 and the no-skill forecast; see
:mod:`real_runs.precision.study`. Frameworks load only when the command runs.

``testbed study precision`` runs the same networks and adds what judging the claim
needs: baselines (climatology, persistence, zero; the most frequent class and the
nearest class mean), bootstrap intervals, paired tests against fp64, learning curves,
the data's gaps and a verdict per task. This command stays as the quick table.
"""

from __future__ import annotations

import click

from testbed.app.progress import Progress, wanted
from testbed.errors import InputError
from testbed.io.write import check_writable_target
from testbed.precision import DEFAULT_NAMES, parse_precisions
from testbed.precision.quantize import ROUNDINGS

FRAMEWORK_NAMES = ("torch", "tensorflow", "chainer")
#: Most seeds one study may run (each trains one network per precision).
MAX_SEEDS = 100


def _seeds(count: int) -> range:
    if count is None or not 1 <= count <= MAX_SEEDS:
        raise InputError(f"must be a number of seeds in 1…{MAX_SEEDS}, got {count}",
                         field="--seeds")
    return range(count)


def _pct(mean, std) -> str:
    return "—" if mean is None else f"{100 * mean:.2f} ± {100 * std:.2f}"


def _num(value, fmt: str = ".3f", signed: bool = False) -> str:
    if value is None:
        return "—"
    if not signed:
        return f"{value:{fmt}}"
    text = f"{value:+{fmt}}"
    return "+" + text[1:] if float(text) == 0 else text   # no "-0.00"


def _rows(result) -> tuple[list[str], list[list[str]]]:
    headers = ["precision", "bytes/value", "max abs err", "max rel err"]
    classify = result.baseline.accuracy_mean is not None
    has_mae = result.baseline.mae_mean is not None
    if classify:
        headers += ["accuracy (%)", "Δ acc (pp)"]
    if has_mae:
        headers += ["MAE", "Δ MAE"]
    if result.task == "regression":
        headers += ["R²"]
    rows = []
    for r in result.results:
        row = [r.precision, f"{r.bytes_per_value:g}", f"{r.max_abs_error:.3g}",
               f"{r.max_rel_error:.3g}"]
        if classify:
            row += [_pct(r.accuracy_mean, r.accuracy_std),
                    f"{_num(r.accuracy_change_pp, '.2f', signed=True)} ± "
                    f"{r.accuracy_change_std_pp:.2f}"]
        if has_mae:
            row += [f"{r.mae_mean:.3f} ± {r.mae_std:.3f}", _num(r.mae_change, ".3f", True)]
        if result.task == "regression":
            row += [_num(r.r2_mean)]
        rows.append(row)
    return headers, rows


def _describe(result) -> str:
    net = result.net
    widths = "-".join(str(w) for w in (net["inputs"], *net["hidden"], net["outputs"]))
    task = {"classification": f"classification into {result.classes} classes",
            "count": "count forecast (regression, rounded to a whole count)",
            "regression": "regression"}[result.task]
    clim = result.climatology
    skill = ", ".join(part for part in (
        None if clim.accuracy is None else f"accuracy {100 * clim.accuracy:.2f} %",
        None if clim.mae is None else f"MAE {clim.mae:.3f}",
        None if clim.r2 is None else f"R² {clim.r2:.3f}") if part)
    return "\n".join([
        f"{result.dataset}: target {result.target}, {task}; {result.split} "
        f"({result.train_rows} train / {result.test_rows} test rows, "
        f"{len(result.features)} inputs)",
        f"network: MLP {widths} in float32 on {result.framework}, Adam lr "
        f"{net['learning_rate']:g}, {net['epochs']} epochs of batch {net['batch_size']}; "
        f"seeds {result.seeds[0]}…{result.seeds[-1]}; intK: {result.rounding} rounding, "
        f"{'per-feature' if result.per_feature_scale else 'global'} scale",
        f"no-skill forecast ({result.climatology_name}): {skill}",
    ])


@click.command("precision-study")
@click.option("--dataset", required=True, metavar="hurricanes|digits|breast-cancer|FILE.csv",
              help="Shipped data set or a CSV file.")
@click.option("--target", default=None, metavar="COLUMN",
              help="Target column (CSV; hurricanes: hurricanes or named_storms).")
@click.option("--precisions", default=",".join(DEFAULT_NAMES), show_default=True,
              help="Comma list of fp64, fp32, fp16, bf16, intK (K=2…16), mantM; intA..intB "
                   "is a range.")
@click.option("--seeds", type=int, default=5, show_default=True,
              help="Number of seeds (0…N−1); each trains one network per precision.")
@click.option("--framework", type=click.Choice(FRAMEWORK_NAMES), default="torch",
              show_default=True, help="Framework that trains the networks.")
@click.option("--rounding", type=click.Choice(ROUNDINGS), default="nearest",
              show_default=True, help="Rounding of intK quantisation.")
@click.option("--scale", "scale", type=click.Choice(["per-feature", "global"]),
              default="per-feature", show_default=True, help="Scale of intK quantisation.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Write the accuracy-vs-bits plot (PNG) here.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def precision_study_cmd(dataset, target, precisions, seeds, framework, rounding, scale, plot,
                        as_json, quiet) -> None:
    """Train one MLP on inputs stored at each precision; accuracy against fp64.

    For baselines, confidence intervals, paired tests and a verdict on the claim, use
    `testbed study precision`."""
    from testbed.app.cli.common import require_framework

    chosen = parse_precisions(precisions, field="--precisions")
    require_framework(framework, command="precision-study")
    from real_runs.precision.data import load_dataset
    from real_runs.precision.study import run_study

    seed_list = _seeds(seeds)
    if plot:
        check_writable_target(plot, field="--plot")
    data = load_dataset(dataset, target)
    total = len(seed_list) * (len(chosen) + (0 if "fp64" in {p.name for p in chosen} else 1))
    with Progress(total, unit="net", desc="precision-study",
                  enabled=wanted(quiet, as_json)) as bar:
        result = run_study(data, chosen, seed_list, framework=framework, rounding=rounding,
                           per_feature=scale == "per-feature",
                           progress=lambda _name, _seed: bar.update())
    if plot:
        from real_runs.precision.plot import plot_study
        plot_study(result, plot)
    if as_json:
        from testbed.app.cli.common import emit_json
        emit_json(result)
        return
    from testbed.app.cli.common import table
    headers, rows = _rows(result)
    click.echo(_describe(result))
    click.echo()
    click.echo(table(headers, rows))
    if plot:
        click.echo(f"\nplot: {plot}")
