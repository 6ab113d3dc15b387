"""``testbed verify PROFILE RECORDS...``: how close a calibrated profile gets to
measurements.

Every record is predicted with the profile (the oracle for training steps and ParaDL
iterations, the fitted sections for micro-benchmarks, checkpoints and restarts, the
simulator for supervised runs — see :mod:`testbed.calibration.predict`), optionally with
configurations held out of a refit
(``--holdout loo|by-batch|by-model``), and scored per quantity: ParaDL's accuracy (mean
of min/max), MAPE, rank correlation, the worst cases. ``--plot FILE.png`` draws
predicted against measured, one colour per quantity.
"""

from __future__ import annotations

import click

from testbed.app.cli.common import emit_json, table
from testbed.errors import InputError
from testbed.io.write import atomic_write, check_writable_target


def simulate_replay(spec) -> tuple[float, float, float, float]:
    """One replication of a trace-replay spec on the fast engine (a replay has no
    randomness: every seed gives the same run)."""
    from simulators.fast import run_fast
    rep = run_fast(spec, 0, 0)
    return rep.wall_s, rep.checkpoint_s, rep.restart_s, rep.lost_s


def scatter_plot(path: str, report) -> None:
    """Predicted vs measured on log axes, the diagonal drawn, one colour per quantity."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    lo, hi = float("inf"), 0.0
    for name in sorted(report.quantities):
        rows = [r for r in report.rows if r.quantity == name]
        xs, ys = [r.measured for r in rows], [r.predicted for r in rows]
        lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
        q = report.quantities[name]
        ax.scatter(xs, ys, s=18, alpha=0.8, label=f"{name} ({q.n}, acc {q.accuracy:.3f})")
    if hi > 0:
        ax.plot([lo / 1.5, hi * 1.5], [lo / 1.5, hi * 1.5], color="#888", lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (s)")
    ax.set_ylabel("predicted (s)")
    ax.set_title(f"{report.profile}: predicted vs measured (hold-out: {report.holdout})")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=110,
                                              metadata={"Software": None}),
                 binary=True, field="--plot")
    plt.close(fig)


def check_out_of_sample(fit, record_set, holdout: str, in_sample: bool) -> None:
    """Refuse record files the profile was fitted on (their SHA-256 is among the fit's
    ``inputs``) when nothing is held out of a refit: their scores would be in sample and
    flatter the profile. ``--in-sample`` scores them anyway (saying so); ``--holdout
    loo|by-batch|by-model`` refits without what it predicts, so it may use them."""
    if fit is None or holdout != "none" or in_sample:
        return
    fitted = {f.sha256: f.path for f in fit.inputs}
    for f in record_set.files:
        if f.sha256 in fitted:
            raise InputError(
                f"the profile was fitted on these records (same SHA-256 as its input "
                f"{fitted[f.sha256]}): a verify of them is in sample — give held-out records "
                "(e.g. holdout.jsonl), --holdout loo|by-batch|by-model, or --in-sample",
                source=f.path)


def run_verify(profile: str, records: tuple[str, ...], holdout: str, in_sample: bool = False):
    """Load, predict and score (shared with ``calibrate-local``); refuses in-sample
    record files unless asked (:func:`check_out_of_sample`)."""
    from testbed.calibration.profile import load_calibrated
    from testbed.calibration.records import load_records
    from testbed.calibration.verify import verify
    prof = load_calibrated(profile)
    record_set = load_records(list(records))
    check_out_of_sample(prof.fit, record_set, holdout, in_sample)
    return verify(record_set, prof.system, prof.fit, holdout=holdout,
                  simulate=simulate_replay, profile_name=prof.system.name)


def print_report(report) -> None:
    rows = []
    for name, q in sorted(report.quantities.items()):
        rho = "-" if q.rank_correlation is None else f"{q.rank_correlation:.3f}"
        rows.append((name, q.n, f"{q.accuracy:.3f}", f"{q.mape_pct:.1f}%", rho, q.flagged))
    click.echo(f"{report.profile}: {report.records} record(s), hold-out {report.holdout}, "
               f"{report.not_covered} not covered by the profile")
    click.echo(table(["quantity", "n", "accuracy", "MAPE", "rank corr.", "flagged"], rows,
                     align="lrrrrr"))
    if any(q.flagged for q in report.quantities.values()):
        click.echo("flagged: predictions beyond their fit (a precision fall-back, a batch "
                   "outside the fitted ones, a model from the law, an unmeasured process "
                   "count); --json lists each one's basis")
    worst = sorted(report.rows, key=lambda r: r.accuracy)[:5]
    if worst:
        click.echo("\nworst cases")
        click.echo(table(["quantity", "record", "measured", "predicted", "accuracy"],
                         [(r.quantity, f"{r.label} ({r.file}:{r.line})", f"{r.measured:.4g}",
                           f"{r.predicted:.4g}", f"{r.accuracy:.3f}") for r in worst],
                         align="llrrr"))


@click.command("verify")
@click.argument("profile")
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--holdout", type=click.Choice(["none", "loo", "by-batch", "by-model"]),
              default="none", show_default=True,
              help="what to leave out of a refit before predicting it")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="write a predicted-vs-measured scatter plot (PNG) here")
@click.option("--in-sample", is_flag=True,
              help="score records the profile was fitted on (refused otherwise: in-sample "
                   "scores flatter it)")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def verify_cmd(profile, records, holdout, plot_path, in_sample, as_json) -> None:
    """Predict every record with PROFILE and report the accuracy per quantity. Records
    the profile was fitted on are refused unless --in-sample or a --holdout refit."""
    if plot_path:
        check_writable_target(plot_path, field="--plot")
    report = run_verify(profile, records, holdout, in_sample)
    if plot_path and report.rows:
        scatter_plot(plot_path, report)
    if as_json:
        data = report.to_dict()
        data["plot"] = plot_path if plot_path and report.rows else None
        emit_json(data)
        return
    print_report(report)
    if plot_path and report.rows:
        click.echo(f"plot: {plot_path}")
