"""``testbed study precision``: does storing the inputs at low precision cost accuracy?

The claim under test (the low-precision input study, issue 13): reducing the precision
of the input data early in a workflow costs little accuracy — e.g. a monthly
hurricane-count forecast loses under 2 percentage points. A model that does not beat
simple forecasts has no accuracy to lose, so each task first asks whether the fp64
network has skill, then whether each claimed precision stays within the tolerance:

1. the same networks as ``precision-study`` (:func:`real_runs.precision.study.run_paired`:
   one MLP per precision × seed, same initial weights and batches per seed, the test
   set shared), with a learning curve each;
2. baselines on the same test items (hurricanes: climatology, persistence, zero;
   digits and breast-cancer: the most frequent class and the nearest class mean) — digits'
   integer pixels are stored exactly by fp16 and bf16, breast-cancer's real-valued
   measurements are not, so the claim's float formats are tested on the latter;
3. accuracy (and MAE for counts) with two-level bootstrap intervals, and *paired*
   differences — precision − fp64, network − best baseline — with intervals and
   permutation p-values (:mod:`testbed.precision.inference`);
4. the verdict per task: *undecided* without skill (the network's interval against
   the best baseline does not lie above the skill margin); else *supported* when every
   claimed precision's change interval lies above −tolerance, *contradicted* when one
   lies wholly below it, *undecided* otherwise;
5. what the data cannot show (:attr:`StudyData.disclosures`) and, for hurricanes, the
   fp64 network trained without the years with missing data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

from testbed.app.study.prec_results import (
    BaselineScore,
    Curve,
    PrecisionStat,
    PrecisionStudy,
    Sensitivity,
    TaskResult,
)
from testbed.app.study.verdict import Verdict, combine
from testbed.errors import InputError
from testbed.precision.inference import (
    PERMUTATIONS,
    RESAMPLES,
    bootstrap_mean,
    paired_test,
    within_margin,
)

TASKS = ("hurricanes", "digits", "breast-cancer")
#: Data sets a sensitivity run trains on instead, per task (hurricanes: from 1979).
SENSITIVITY = {"hurricanes": "hurricanes-1979"}
CLAIMED = ("fp16", "bf16", "int8")
DEFAULT_PRECISIONS = ("fp64", "fp32", "fp16", "bf16", "int8", "int6", "int4", "int3", "int2")


@dataclass(frozen=True)
class PrecisionOptions:
    """What the study runs (the CLI's options; :data:`QUICK` for ``--quick``)."""

    tasks: tuple[str, ...] = TASKS
    precisions: tuple[str, ...] = DEFAULT_PRECISIONS
    claim_precisions: tuple[str, ...] | None = None    # None: CLAIMED ∩ precisions
    seeds: int = 10
    framework: str = "torch"
    rounding: str = "nearest"
    per_feature: bool = True
    tolerance_pp: float = 2.0
    skill_margin_pp: float = 0.0
    resamples: int = RESAMPLES
    permutations: int = PERMUTATIONS
    curves: bool = True
    sensitivity: bool = True
    seed: int = 0
    quick: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


#: Most bootstrap resamples or permutation sign flips (a full study at this many draws
#: takes minutes of inference on top of its training).
MAX_DRAWS = 100_000
QUICK = PrecisionOptions(precisions=("fp64", "fp16", "int8", "int2"), seeds=2, resamples=400,
                         permutations=1000, quick=True)


def claimed(opts: PrecisionOptions) -> tuple[str, ...]:
    if opts.claim_precisions is not None:
        return opts.claim_precisions
    return tuple(p for p in CLAIMED if p in opts.precisions)


def _item_scores(data, forecasts: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Per-item correctness (classification, count) and absolute error (count,
    regression) of forecasts shaped (…, items)."""
    truth = data.y_test
    correct = (forecasts == truth).astype(np.float64) if data.task != "regression" else None
    error = np.abs(forecasts - truth) if data.task != "classification" else None
    return correct, error


def _baselines(data, opts: PrecisionOptions, key: int) -> tuple[BaselineScore, ...]:
    out = []
    for ref in data.references:
        values = ref.predictions
        if data.task == "count":
            values = np.maximum(np.rint(values), 0.0)
        correct, error = _item_scores(data, values)
        kw = dict(seed=opts.seed, key=key, resamples=opts.resamples)
        out.append(BaselineScore(
            ref.name, None if correct is None else bootstrap_mean(correct, data.test_blocks, **kw),
            None if error is None else bootstrap_mean(error, data.test_blocks, **kw)))
    return tuple(out)


def _paired(a, b, data, opts, key, scale=1.0):
    if a is None or b is None:
        return None
    test = paired_test(a, b, data.test_blocks, seed=opts.seed, key=key,
                       resamples=opts.resamples, permutations=opts.permutations)
    return replace(test, difference=test.difference.scaled(scale))


def _precision_stats(data, runs, opts: PrecisionOptions, key: int) -> tuple[PrecisionStat, ...]:
    correct, error = _item_scores(data, runs.forecasts)
    out = []
    for i, (p, report) in enumerate(zip(runs.precisions, runs.reports, strict=True)):
        kw = dict(seed=opts.seed, key=key, resamples=opts.resamples)
        acc = None if correct is None else bootstrap_mean(correct[i], data.test_blocks, **kw)
        mae = None if error is None else bootstrap_mean(error[i], data.test_blocks, **kw)
        change = _paired(None if correct is None else correct[i],
                         None if correct is None else correct[0], data, opts, key, 100.0)
        mae_change = _paired(None if error is None else error[i],
                             None if error is None else error[0], data, opts, key)
        verdict = within_margin(change.difference, opts.tolerance_pp) if change else "undecided"
        out.append(PrecisionStat(
            precision=p.name, kind=p.kind, bits_per_value=p.bits_per_value,
            bytes_per_value=p.bytes_per_value, max_abs_error=report.max_abs_error,
            max_rel_error=report.max_rel_error, accuracy=acc, mae=mae, change_pp=change,
            mae_change=mae_change, within_tolerance=verdict, in_claim=p.name in claimed(opts)))
    return tuple(out)


def _curves(data, runs) -> tuple[Curve, ...]:
    if runs.curve_forecasts is None or runs.train_loss is None:
        return ()
    correct, error = _item_scores(data, runs.curve_forecasts)
    epochs = tuple(range(1, runs.train_loss.shape[2] + 1))
    return tuple(Curve(
        precision=p.name, epochs=epochs,
        train_loss=tuple(float(v) for v in runs.train_loss[i].mean(axis=0)),
        accuracy=None if correct is None else tuple(float(v) for v in
                                                    correct[i].mean(axis=(0, 2))),
        mae=None if error is None else tuple(float(v) for v in error[i].mean(axis=(0, 2))))
        for i, p in enumerate(runs.precisions))


def _skill(data, runs, baselines, opts, key):
    """(best baseline's name, fp64 − best baseline in pp, has skill)."""
    correct, _ = _item_scores(data, runs.forecasts)
    if correct is None:
        return baselines[0].name, None, False
    best_i = max(range(len(baselines)), key=lambda j: baselines[j].accuracy.mean)
    ref = data.references[best_i].predictions
    ref = np.maximum(np.rint(ref), 0.0) if data.task == "count" else ref
    ref_correct, _ = _item_scores(data, ref)
    test = _paired(correct[0], ref_correct, data, opts, key, 100.0)
    return baselines[best_i].name, test, bool(test.difference.low > opts.skill_margin_pp)


def claim_text(opts: PrecisionOptions) -> str:
    return (f"Storing the inputs at {', '.join(claimed(opts)) or 'reduced precision'} instead "
            f"of fp64 costs less than {opts.tolerance_pp:g} percentage points of accuracy")


def _pp(test) -> str:
    d = test.difference
    return f"{d.mean:+.2f} pp [{d.low:+.2f}, {d.high:+.2f}], p = {test.p_value:.3g}"


def task_verdict(task: str, opts: PrecisionOptions, best: str, skill, has_skill: bool,
                 stats: tuple[PrecisionStat, ...]) -> Verdict:
    """The claim on one task (module doc, step 4)."""
    rule = (f"undecided unless the fp64 network beats its best baseline (paired interval "
            f"above {opts.skill_margin_pp:g} pp); then supported if every claimed "
            f"precision's paired change interval lies above −{opts.tolerance_pp:g} pp, "
            f"contradicted if one lies wholly below, else undecided")
    claim = claim_text(opts)
    if skill is None:
        return Verdict(claim, "undecided", "accuracy does not apply to this task", rule, task)
    if not has_skill:
        return Verdict(claim, "undecided",
                       f"the fp64 network does not beat {best} ({_pp(skill)}): a model "
                       "without skill has no accuracy to lose", rule, task)
    parts = [s for s in stats if s.in_claim and s.change_pp is not None]
    if not parts:
        return Verdict(claim, "undecided", "no claimed precision was run", rule, task)
    verdict = combine([s.within_tolerance for s in parts])
    evidence = (f"skill over {best}: {_pp(skill)}; "
                + "; ".join(f"{s.precision} {_pp(s.change_pp)}" for s in parts if s.change_pp))
    return Verdict(claim, verdict, evidence, rule, task)


def _sensitivity(task: str, runs, opts: PrecisionOptions, key: int,
                 progress) -> tuple[Sensitivity, ...]:
    from real_runs.precision.data import load_dataset
    from real_runs.precision.study import run_paired
    from testbed.precision import parse_precision
    if not opts.sensitivity or task not in SENSITIVITY:
        return ()
    other = load_dataset(SENSITIVITY[task])
    alt = run_paired(other, [parse_precision("fp64")], list(range(opts.seeds)),
                     framework=opts.framework, rounding=opts.rounding,  # type: ignore[arg-type]
                     per_feature=opts.per_feature, progress=progress)
    correct, _ = _item_scores(other, alt.forecasts[0])
    main, _ = _item_scores(other, runs.forecasts[0])
    acc = bootstrap_mean(correct, other.test_blocks, seed=opts.seed, key=key,
                         resamples=opts.resamples) if correct is not None else None
    return (Sensitivity(f"fp64, trained without the years before {other.split.split()[1][:4]}",
                        other.split, acc, _paired(correct, main, other, opts, key, 100.0)),)


def run_task(task: str, opts: PrecisionOptions, key: int,
             progress: Callable[[str, int], None] | None = None) -> TaskResult:
    """One task of the study (module doc)."""
    from real_runs.precision.data import load_dataset
    from real_runs.precision.study import net_spec, run_paired
    from testbed.precision import parse_precisions
    data = load_dataset(task)
    runs = run_paired(data, parse_precisions(",".join(opts.precisions), field="--precisions"),
                      list(range(opts.seeds)), framework=opts.framework,  # type: ignore[arg-type]
                      rounding=opts.rounding, per_feature=opts.per_feature,  # type: ignore[arg-type]
                      curves=opts.curves, progress=progress)
    baselines = _baselines(data, opts, key)
    best, skill, has_skill = _skill(data, runs, baselines, opts, key)
    stats = _precision_stats(data, runs, opts, key)
    spec = net_spec(data)
    widths = "-".join(str(w) for w in spec.widths)
    description = (f"{data.name}: target {data.target} ({data.task}), {data.split}; "
                   f"{len(data.y_train)} training / {len(data.y_test)} test items in "
                   f"{len(np.unique(data.test_blocks))} bootstrap blocks ({data.block_name})",
                   f"network: MLP {widths}, float32, {opts.framework}, Adam lr "
                   f"{spec.learning_rate:g}, {spec.epochs} epochs of batch {spec.batch_size}; "
                   f"seeds 0…{opts.seeds - 1}; intK {opts.rounding} rounding, "
                   f"{'per-feature' if opts.per_feature else 'global'} scale")
    return TaskResult(
        task=task, kind=data.task, target=data.target, description=description,
        framework=opts.framework, seeds=runs.seeds, test_items=len(data.y_test),
        blocks=len(np.unique(data.test_blocks)), block_name=data.block_name,
        baselines=baselines, best_baseline=best, skill_pp=skill, has_skill=has_skill,
        precisions=stats, curves=_curves(data, runs), disclosures=data.disclosures,
        sensitivity=_sensitivity(task, runs, opts, key, progress),
        verdict=task_verdict(task, opts, best, skill, has_skill, stats))


def steps_of(opts: PrecisionOptions) -> int:
    """Networks a study trains (for a progress bar)."""
    per_task = (len({"fp64", *opts.precisions})) * opts.seeds
    extra = sum(opts.seeds for t in opts.tasks if opts.sensitivity and t in SENSITIVITY)
    return per_task * len(opts.tasks) + extra


def run_precision_study(opts: PrecisionOptions,
                        progress: Callable[[str, int], None] | None = None) -> PrecisionStudy:
    tasks = tuple(run_task(t, opts, key, progress) for key, t in enumerate(opts.tasks))
    return PrecisionStudy(quick=opts.quick, tolerance_pp=opts.tolerance_pp,
                          claim_precisions=claimed(opts), tasks=tasks, settings=opts.to_dict())


def validate(opts: PrecisionOptions) -> PrecisionOptions:
    """Canonical precisions (fp64 first) or an :class:`InputError` naming the option."""
    from real_runs.precision.nets import FRAMEWORKS
    from testbed.precision import parse_precisions
    bad = [t for t in opts.tasks if t not in TASKS]
    if bad:
        raise InputError(f"unknown task(s) {', '.join(bad)}; known: {', '.join(TASKS)}",
                         field="--tasks")
    chosen = [p.name for p in parse_precisions(",".join(opts.precisions), field="--precisions")]
    names = tuple(dict.fromkeys(["fp64", *chosen]))
    if opts.claim_precisions is not None:
        claim = [p.name for p in parse_precisions(",".join(opts.claim_precisions),
                                                  field="--claim-precisions")]
        missing = [c for c in claim if c not in names]
        if missing:
            raise InputError(f"{', '.join(missing)} not among --precisions",
                             field="--claim-precisions")
        opts = replace(opts, claim_precisions=tuple(claim))
    if opts.framework not in FRAMEWORKS:
        raise InputError(f"unknown framework {opts.framework!r}; known: {', '.join(FRAMEWORKS)}",
                         field="--framework")
    for name, value, low in (("--seeds", opts.seeds, 1), ("--resamples", opts.resamples, 100),
                             ("--permutations", opts.permutations, 100)):
        if isinstance(value, bool) or value < low:
            raise InputError(f"must be a whole number ≥ {low}, got {value}", field=name)
    if opts.seeds > 100:
        raise InputError(f"at most 100 seeds, got {opts.seeds}", field="--seeds")
    for name, value in (("--resamples", opts.resamples), ("--permutations", opts.permutations)):
        if value > MAX_DRAWS:       # each interval draws this many, per task and precision
            raise InputError(f"at most {MAX_DRAWS:,} draws, got {value}", field=name)
    if not opts.tolerance_pp > 0:
        raise InputError("must be > 0 percentage points", field="--tolerance")
    return replace(opts, precisions=names)
