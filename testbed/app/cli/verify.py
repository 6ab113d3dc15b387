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


def run_verify(profile: str, records: tuple[str, ...], holdout: str):
    """Load, predict and score (shared with ``calibrate-local``)."""
    from testbed.calibration.profile import load_calibrated
    from testbed.calibration.records import load_records
    from testbed.calibration.verify import verify
    prof = load_calibrated(profile)
    return verify(load_records(list(records)), prof.system, prof.fit, holdout=holdout,
                  simulate=simulate_replay, profile_name=prof.system.name)


def print_report(report) -> None:
    rows = []
    for name, q in sorted(report.quantities.items()):
        rho = "-" if q.rank_correlation is None else f"{q.rank_correlation:.3f}"
        rows.append((name, q.n, f"{q.accuracy:.3f}", f"{q.mape_pct:.1f}%", rho))
    click.echo(f"{report.profile}: {report.records} record(s), hold-out {report.holdout}, "
               f"{report.not_covered} not covered by the profile")
    click.echo(table(["quantity", "n", "accuracy", "MAPE", "rank corr."], rows, align="lrrrr"))
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
@click.option("--json", "as_json", is_flag=True)
def verify_cmd(profile, records, holdout, plot_path, as_json) -> None:
    """Predict every record with PROFILE and report the accuracy per quantity."""
    if plot_path:
        check_writable_target(plot_path, field="--plot")
    report = run_verify(profile, records, holdout)
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
