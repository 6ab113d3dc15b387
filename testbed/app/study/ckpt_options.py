"""What ``testbed study checkpoint`` measures: its options, the ``--quick`` set, and
their validation before anything runs (every bad value one :class:`InputError` naming
its option)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from testbed.app.study.ckpt_analysis import BOUND_FACTOR, FRAMEWORKS, MIN_SPEEDUP
from testbed.errors import InputError, UnknownNameError


@dataclass(frozen=True)
class CheckpointOptions:
    """What the study measures (the CLI's options; :data:`QUICK` for ``--quick``)."""

    frameworks: tuple[str, ...] = FRAMEWORKS
    models: tuple[str, ...] = ("resnet50", "mlp", "cnn", "resnet", "resnet18")
    formats: tuple[str, ...] | None = None
    repeats: int = 3
    writers: tuple[int, ...] = (1, 2, 4, 8)
    modes: tuple[str, ...] = ("sharded", "all")
    scaling_frameworks: tuple[str, ...] = FRAMEWORKS
    scaling_model: str = "resnet50"
    scaling_repeats: int = 5
    restart_models: tuple[str, ...] = ("mlp", "cnn", "resnet", "resnet18")
    restart_steps: int = 8
    restart_k: int = 3
    omit: str | None = "rng"
    fresh_interpreter: bool = False
    system: str = "abci-v100"
    gpus: tuple[int, ...] | None = None
    interval_s: float = 1800.0
    bound_factor: float = BOUND_FACTOR
    min_speedup: float = MIN_SPEEDUP
    ckpt_dir: str | None = None
    seed: int = 0
    quick: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


#: ``--quick``: the harness MLP in every format, one repetition, 1 and 2 writers of one
#: PyTorch ResNet-18 state (4 rounds: the fewest for a 95% interval of a speed-up), one
#: restart case per framework (seconds to a minute).
#: Most repetitions of every save and load, and most steps of a restart run (both
#: multiply the study's minutes).
MAX_REPEATS, MAX_RESTART_STEPS = 1000, 10_000
QUICK = CheckpointOptions(models=("mlp",), repeats=1, writers=(1, 2), modes=("sharded",),
                          scaling_frameworks=("torch",), scaling_model="resnet18",
                          scaling_repeats=4, restart_models=("mlp",), restart_steps=6,
                          quick=True)


def _refield(exc: InputError, option: str) -> InputError:
    return type(exc)(exc.message, source=exc.source, field=option)


def _frameworks(values: tuple[str, ...], option: str) -> tuple[str, ...]:
    from real_runs.harness import canonical_framework
    try:
        return tuple(dict.fromkeys(canonical_framework(v) for v in values))
    except InputError as exc:
        raise _refield(exc, option) from None


def _check_models(opts: CheckpointOptions) -> None:
    from real_runs.ckpt_study.subjects import check_study_model
    from real_runs.harness import MODELS, OMITTABLE
    for model in opts.models:
        check_study_model(model)
    try:
        check_study_model(opts.scaling_model)
    except InputError as exc:
        raise _refield(exc, "--scaling-model") from None
    bad = [m for m in opts.restart_models if m not in MODELS]
    if bad:
        raise InputError(f"the restart check runs the harness models ({', '.join(MODELS)}), "
                         f"not {', '.join(bad)}", field="--restart-models")
    if not 1 <= opts.restart_k < opts.restart_steps:
        raise InputError(f"the checkpoint step must be in 1…{opts.restart_steps - 1} "
                         f"(--restart-steps {opts.restart_steps}), got {opts.restart_k}",
                         field="--restart-k")
    if opts.omit is not None and opts.omit not in OMITTABLE:
        raise InputError(f"choose one of {', '.join(OMITTABLE)}", field="--omit")


def _check_formats(opts: CheckpointOptions) -> None:
    from real_runs.ckpt_study.bench import study_formats
    known = {f for fw in opts.frameworks for f in study_formats(fw)}
    bad = [f for f in opts.formats or () if f not in known]
    if bad:
        raise InputError(f"unknown format(s) {', '.join(bad)} for "
                         f"{', '.join(opts.frameworks)}; known: {', '.join(sorted(known))}",
                         field="--formats")


def _check_writers(opts: CheckpointOptions) -> None:
    """At most the local process cap, and the memory every writer needs at once."""
    from real_runs.ckpt_study.payload import shard, state_shapes, tensor_bytes
    from real_runs.ckpt_study.subjects import model_ir
    from real_runs.ckpt_study.writers import MODES
    from real_runs.env import available_memory_bytes, max_local_processes
    from real_runs.harness import FRAMEWORK_BYTES
    from testbed.units import format_bytes
    bad = [m for m in opts.modes if m not in MODES]
    if bad:
        raise InputError(f"unknown mode(s) {', '.join(bad)}; known: {', '.join(MODES)}",
                         field="--modes")
    top = max(opts.writers)
    if top > max_local_processes():
        raise InputError(f"at most {max_local_processes()} processes on this machine, got "
                         f"{top}", field="--writers")
    shapes = state_shapes(model_ir(opts.scaling_model))
    total = sum(tensor_bytes(s) for _, s in shapes)
    share = sum(tensor_bytes(s) for _, s in shard(shapes, 0, top))
    per_writer = total if "all" in opts.modes else share
    framework = max((FRAMEWORK_BYTES[fw] for fw in opts.scaling_frameworks), default=0)
    need = top * (framework + 2 * per_writer)   # the arrays and the framework's copy of them
    have = available_memory_bytes()
    if have is not None and need > have:
        raise InputError(f"{top} writers of {opts.scaling_model} need about "
                         f"{format_bytes(need)} of memory; {format_bytes(have)} is available",
                         field="--writers")


def _check_numbers(opts: CheckpointOptions) -> None:
    for name, value, most in (("--repeats", opts.repeats, MAX_REPEATS),
                              ("--restart-steps", opts.restart_steps, MAX_RESTART_STEPS)):
        if isinstance(value, bool) or value < 1:
            raise InputError(f"must be a positive whole number, got {value}", field=name)
        if value > most:        # every repetition saves and loads every format and model
            raise InputError(f"at most {most:,}, got {value}", field=name)
    if not 0 <= opts.seed < 2**31:
        raise InputError(f"must be in 0…{2**31 - 1}, got {opts.seed}", field="--seed")
    if not opts.interval_s > 0:
        raise InputError("must be a duration > 0", field="--interval")
    for option, factor in (("--bound-factor", opts.bound_factor),
                           ("--min-speedup", opts.min_speedup)):
        if not factor > 0:
            raise InputError(f"must be > 0, got {factor}", field=option)


def validate(opts: CheckpointOptions) -> CheckpointOptions:
    """``opts`` with canonical framework names, or an :class:`InputError` naming the
    option, before anything runs."""
    from testbed.systems.profile import load_system
    opts = replace(opts, frameworks=_frameworks(opts.frameworks, "--frameworks"),
                   scaling_frameworks=_frameworks(opts.scaling_frameworks,
                                                  "--scaling-frameworks"))
    _check_numbers(opts)
    _check_models(opts)
    _check_formats(opts)
    _check_writers(opts)
    try:
        load_system(opts.system)
    except UnknownNameError as exc:
        raise _refield(exc, "--system") from None
    if opts.ckpt_dir is not None and not Path(opts.ckpt_dir).is_dir():
        raise InputError("is not a folder", source=opts.ckpt_dir, field="--ckpt-dir")
    return opts
