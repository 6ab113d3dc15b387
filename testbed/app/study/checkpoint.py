"""``testbed study checkpoint``: the checkpointing study, rerun on this machine.

The study (Rojas, Kahira, Meneses, Bautista-Gomez, Badia, "A Study of Checkpointing in
Large Scale Training of Deep Neural Networks", arXiv:2012.00825) compares Chainer,
PyTorch and TensorFlow on the cost of checkpointing, file formats and sizes, the impact
of scale and deterministic checkpointing, and reports bottlenecks in the frameworks'
checkpointing. Here, with real frameworks:

1. **formats** — ResNet-50 (25.6 M parameters with momentum: 204 MB) and the harness
   models, every format of each framework, save / durable commit / load against ``dd``
   of the same bytes (:mod:`real_runs.ckpt_study.bench`, a child process per framework);
2. **writers** — 1…N processes saving at once, sharded or each a full copy
   (:mod:`real_runs.ckpt_study.writers`), against N concurrent ``dd``;
3. **beyond this machine** — the oracle's checkpoint physics on a cluster profile, with
   the profile's and the measured serialisation rates (:mod:`.ckpt_oracle`);
4. **deterministic restart** — straight through vs checkpoint at k + restore in a new
   process, bit for bit, and a restore without the RNG state that must differ
   (:mod:`real_runs.ckpt_study.restart`).

:func:`run_checkpoint_study` returns a :class:`CheckpointStudy` with the bottlenecks,
claims and advice computed from the rows (:mod:`.ckpt_analysis`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from testbed.app.study.ckpt_analysis import (
    FRAMEWORKS,
    MAIN_FORMAT,
    REAL_SIZE_BYTES,
    advice,
    bottleneck_claim,
    findings,
    largest_rows,
    restart_claim,
    scaling_claims,
)
from testbed.app.study.ckpt_options import CheckpointOptions
from testbed.app.study.ckpt_oracle import project
from testbed.app.study.ckpt_results import (
    CheckpointStudy,
    FormatRow,
    RestartRow,
    ScalingRow,
    pool_dd,
)
from testbed.errors import InputError

Progress = Callable[[str], None]
#: Seconds one framework's format benchmark may take (TensorFlow's SavedModel of
#: ResNet-50 traces the graph: about 10 s a repetition here).
BENCH_TIMEOUT_S = 3600.0


def _bench(opts: CheckpointOptions, root: Path, progress: Progress) -> list[FormatRow]:
    """Every framework's formats (a child process each); dd pooled over all rows."""
    from real_runs.ckpt_study.child import stream_json_child
    records: list[dict] = []
    for fw in opts.frameworks:
        args = ["--framework", fw, "--models", ",".join(opts.models), "--repeats",
                str(opts.repeats), "--dir", str(root / "formats"), "--seed", str(opts.seed)]
        if opts.formats:
            from real_runs.ckpt_study.bench import study_formats
            mine = [f for f in opts.formats if f in study_formats(fw)]
            if not mine:
                continue
            args += ["--formats", ",".join(mine)]
        def on_record(rec: dict) -> None:
            records.append(rec)
            progress(f"{rec['framework']} {rec['model']} {rec['format']}")

        stream_json_child("real_runs.ckpt_study.bench", args, timeout_s=BENCH_TIMEOUT_S,
                          what=f"{fw} checkpoint formats", on_record=on_record)
    return [FormatRow.from_record(rec) for rec in pool_dd(records)]


def _scaling(opts: CheckpointOptions, root: Path, progress: Progress) -> list[ScalingRow]:
    from real_runs.ckpt_study.writers import writers_round
    rows: list[ScalingRow] = []
    counts = sorted({1, *opts.writers})
    for fw in opts.scaling_frameworks:
        for mode in opts.modes:
            one = None
            for n in counts:
                rec = writers_round(fw, opts.scaling_model, n, mode, opts.scaling_repeats,
                                    root / f"writers-{fw}-{mode}-{n}", opts.seed)
                row = _scaling_row(rec, one, mode)
                one = one or row
                rows.append(row)
                progress(f"{n} {fw} writer(s), {mode}")
    return rows


def _scaling_row(rec: dict, one: ScalingRow | None, mode: str) -> ScalingRow:
    """The row of one writer count; speed-ups against the one-writer row ``one``."""
    from testbed.app.study.ckpt_stats import ratio_interval
    row = ScalingRow(**{**rec, "durable_runs_s": tuple(rec["durable_runs_s"])},
                     aggregate_GBps=rec["bytes_total"] / rec["durable_min_s"] / 1e9,
                     dd_GBps=rec["bytes_total"] / rec["dd_durable_s"] / 1e9)
    base = one or row
    ratio = ratio_interval(base.durable_runs_s, row.durable_runs_s)
    scale = row.writers if mode == "all" else 1   # "all": N times the bytes in that time
    if one is None:
        ratio = replace(ratio, estimate=1.0, low=1.0, high=1.0)
    return replace(row, speedup=scale * ratio.estimate, speedup_low=scale * ratio.low,
                   speedup_high=scale * ratio.high, speedup_confidence=ratio.achieved,
                   efficiency=scale * ratio.estimate / row.writers)


def _restarts(opts: CheckpointOptions, progress: Progress) -> list[RestartRow]:
    from real_runs.ckpt_study.restart import RestartCase, run_cases
    cases = [RestartCase(m, opts.seed, opts.restart_steps, opts.restart_k)
             for m in opts.restart_models]
    if opts.omit:
        cases.append(RestartCase(opts.restart_models[0], opts.seed, opts.restart_steps,
                                 opts.restart_k, opts.omit))
    rows: list[RestartRow] = []
    for fw in opts.frameworks:
        for rec in run_cases(fw, cases, fresh_interpreter=opts.fresh_interpreter):
            rows.append(RestartRow(**rec))
            progress(f"{fw} {rec['model']} restart" + (f" without {rec['omit']}"
                                                        if rec["omit"] else ""))
    return rows


def measured_rates(rows: list[FormatRow]) -> dict[str, float]:
    """Each framework's serialisation rate in GB/s: bytes over the fastest save of its
    everyday format at its largest model, if that checkpoint is of real size."""
    out = {}
    for fw in FRAMEWORKS:
        main = [r for r in largest_rows(rows, fw) if r.format == MAIN_FORMAT[fw]]
        if main and main[0].ckpt_bytes >= REAL_SIZE_BYTES and main[0].save_GBps:
            out[fw] = main[0].save_GBps
    return out


def steps_of(opts: CheckpointOptions) -> int:
    """Progress steps of a study (for a bar)."""
    from real_runs.ckpt_study.bench import study_formats
    formats = sum(len([f for f in study_formats(fw) if not opts.formats or f in opts.formats])
                  for fw in opts.frameworks) * len(opts.models)
    scaling = len(opts.scaling_frameworks) * len(opts.modes) * len({1, *opts.writers})
    cases = len(opts.restart_models) + (1 if opts.omit else 0)
    return formats + scaling + cases * len(opts.frameworks)


def run_checkpoint_study(opts: CheckpointOptions,
                         progress: Progress | None = None) -> CheckpointStudy:
    """Run the study (module doc)."""
    from real_runs.env import capture_environment
    step = progress or (lambda _what: None)
    load_before = _load_average()
    root, own = _root(opts.ckpt_dir)
    try:
        rows = _bench(opts, root, step)
        scaling = _scaling(opts, root, step)
        restarts = _restarts(opts, step)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    oracle = project(opts.system, opts.gpus, opts.interval_s, measured_rates(rows))
    found = findings(rows)
    env = capture_environment().to_dict()
    env["ckpt_dir_free_bytes"] = shutil.disk_usage(root.parent).free
    # other work on the machine adds time to every measurement: say how busy it was
    env["load_average_1min"] = {"before": load_before, "after": _load_average()}
    scope = (f"this machine: {env['cpu_count']} CPUs, one file system "
             f"({opts.ckpt_dir or tempfile.gettempdir()}), load average "
             f"{load_before} → {env['load_average_1min']['after']}")
    claims = (restart_claim(restarts), bottleneck_claim(rows, opts.bound_factor),
              *scaling_claims(scaling, opts.min_speedup, scope))
    return CheckpointStudy(
        quick=opts.quick, ckpt_dir=str(opts.ckpt_dir or tempfile.gettempdir()),
        environment=env, formats=tuple(rows), scaling=tuple(scaling), oracle=oracle,
        restarts=tuple(restarts), findings=found, claims=claims,
        advice=advice(rows, found, scaling, oracle, restarts), settings=opts.to_dict())


def _load_average() -> float | None:
    import os
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _root(ckpt_dir: str | None) -> tuple[Path, bool]:
    """The folder checkpoints go to (a fresh one inside ``ckpt_dir``, removed after)."""
    base = Path(ckpt_dir) if ckpt_dir else Path(tempfile.gettempdir())
    if not base.is_dir():
        raise InputError("is not a folder", source=str(base), field="--ckpt-dir")
    try:
        return Path(tempfile.mkdtemp(prefix="testbed-ckpt-study-", dir=base)), True
    except OSError as exc:
        from testbed.io.write import os_reason
        raise InputError(f"cannot write checkpoints here: {os_reason(exc)}", source=str(base),
                         field="--ckpt-dir") from None

