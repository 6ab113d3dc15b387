"""What the checkpoint measurements say: bottlenecks per framework, the claims, advice.

Everything here is computed from the rows; no number is written in. Thresholds are
the study's options (``--bound-factor``, ``--min-speedup``) with the defaults below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from testbed.app.study.ckpt_results import (
    PHASE_LABELS,
    FormatRow,
    FrameworkFinding,
    OracleRow,
    RestartRow,
    ScalingRow,
)
from testbed.app.study.verdict import Outcome, Verdict
from testbed.stats import CONFIDENCE
from testbed.units import format_bytes, format_duration

FRAMEWORKS = ("torch", "tensorflow", "chainer")
#: Each framework's everyday format (what its tutorials and trainers call).
MAIN_FORMAT = {"torch": "torch.save", "tensorflow": "tf.train.Checkpoint",
               "chainer": "save_npz"}
#: Smallest checkpoint that counts as real size: below it a save's fixed costs (file
#: creates, fsync latency, bookkeeping) dominate and say nothing about bandwidth.
REAL_SIZE_BYTES = 64 * 2**20
#: A durable save this many times dd's durable write of the same bytes is bound by the
#: framework, not by the storage.
BOUND_FACTOR = 2.0
#: Speed-up of a sharded save over one writer that counts as "sharding helps".
MIN_SPEEDUP = 1.2


def _t(seconds: float) -> str:
    return format_duration(seconds)


def largest_rows(rows: Sequence[FormatRow], framework: str) -> list[FormatRow]:
    """The framework's rows of its largest model measured."""
    mine = [r for r in rows if r.framework == framework]
    if not mine:
        return []
    top = max(r.parameters for r in mine)
    return [r for r in mine if r.parameters == top]


def finding(rows: Sequence[FormatRow], framework: str) -> FrameworkFinding | None:
    """Where ``framework``'s checkpoint time goes (see :class:`FrameworkFinding`)."""
    rs = largest_rows(rows, framework)
    if not rs:
        return None
    fastest = min(rs, key=lambda r: r.durable_s)
    slowest = max(rs, key=lambda r: r.durable_s)
    main = next((r for r in rs if r.format == MAIN_FORMAT.get(framework)), fastest)
    share = main.serialise_s / main.durable_s if main.durable_s > 0 else 0.0
    load = min(rs, key=lambda r: r.load_min_s)
    ratio = f"{main.durable_vs_dd:.1f}×" if main.durable_vs_dd else "—"
    largest = 100 * getattr(main, main.bottleneck) / main.durable_s if main.durable_s else 0.0
    serialise = ("" if main.bottleneck == "serialise_s"
                 else f", serialisation {100 * share:.0f}%")
    text = (f"{framework} {main.model} ({format_bytes(main.ckpt_bytes)}): {main.format} "
            f"takes {_t(main.durable_s)} durable, {ratio} dd of the same bytes; "
            f"{PHASE_LABELS[main.bottleneck]} is its largest phase ({largest:.0f}%"
            f"{serialise}). Fastest durable save: {fastest.format} "
            f"({_t(fastest.durable_s)}); slowest: {slowest.format} ({_t(slowest.durable_s)}, "
            f"{slowest.durable_s / fastest.durable_s:.1f}×). Fastest load: {load.format} "
            f"({_t(load.load_min_s)}).")
    return FrameworkFinding(
        framework=framework, model=main.model, ckpt_bytes=main.ckpt_bytes,
        fastest_format=fastest.format, fastest_durable_s=fastest.durable_s,
        slowest_format=slowest.format, slowest_durable_s=slowest.durable_s,
        main_format=main.format, main_bottleneck=main.bottleneck,
        main_durable_vs_dd=main.durable_vs_dd, main_serialise_share=share,
        fastest_load_format=load.format, fastest_load_s=load.load_min_s, text=text)


def findings(rows: Sequence[FormatRow]) -> tuple[FrameworkFinding, ...]:
    return tuple(f for f in (finding(rows, fw) for fw in FRAMEWORKS) if f is not None)


# -- claims ------------------------------------------------------------------------------

RESTART_CLAIM = ("Restarting from a complete checkpoint (model, optimizer, RNG states, data "
                 "position) in a new process continues bitwise identically to training "
                 "straight through, in PyTorch, TensorFlow and Chainer")


def restart_claim(restarts: Sequence[RestartRow]) -> Verdict:
    rule = ("supported: every complete restore identical (parameters' SHA-256 and every "
            "loss) in a new process, for all three frameworks, and every restore that "
            "omits a state differs; contradicted: a complete restore differs; else undecided")
    complete = [r for r in restarts if r.omit is None]
    omitted = [r for r in restarts if r.omit is not None]
    broken = [r for r in complete if not r.identical or not r.new_process]
    if broken:
        names = ", ".join(f"{r.framework} {r.model} seed {r.seed} k={r.k}" for r in broken)
        return Verdict(RESTART_CLAIM, "contradicted", f"restores that differ: {names}", rule)
    covered = sorted({r.framework for r in complete})
    missing = [fw for fw in FRAMEWORKS if fw not in covered]
    toothless = [r for r in omitted if r.identical]
    same = (f"{len(complete)} complete restore(s) bitwise identical "
            f"({', '.join(covered) or 'none'})")
    if toothless:
        names = ", ".join(f"{r.framework} without {r.omit}" for r in toothless)
        return Verdict(RESTART_CLAIM, "undecided",
                       f"{same}, but restores that omitted state were identical too ({names}): "
                       "the comparison cannot tell a complete checkpoint from an incomplete one",
                       rule)
    if missing or not omitted:
        why = (f"not run for {', '.join(missing)}" if missing
               else "no restore omitted a state, so the comparison's power is not shown")
        return Verdict(RESTART_CLAIM, "undecided", f"{same}; {why}", rule)
    return Verdict(RESTART_CLAIM, "supported",
                   f"{same}; {len(omitted)} restore(s) without "
                   f"{', '.join(sorted({str(r.omit) for r in omitted}))} differ", rule)


def bottleneck_claim(rows: Sequence[FormatRow], factor: float = BOUND_FACTOR) -> Verdict:
    claim = ("Framework checkpointing has bottlenecks of its own: some framework's format "
             f"takes at least {factor:g}× as long to save to the disk as dd takes to write "
             "the same bytes there")
    rule = (f"frameworks' own formats (not the harness's), checkpoints of at least "
            f"{format_bytes(REAL_SIZE_BYTES)}, save + fsync (the store's checksum left out) "
            f"against the fastest dd conv=fsync of as many bytes: supported if a format takes "
            f"≥ {factor:g}×, contradicted if every format stays below, undecided without a "
            "checkpoint of that size")
    big = [r for r in rows if r.ckpt_bytes >= REAL_SIZE_BYTES and r.framework_vs_dd
           and r.format != "harness"]
    if not big:
        return Verdict(claim, "undecided", "no checkpoint of real size was measured (run "
                       "with the resnet50 model, i.e. without --quick)", rule)
    worst: dict[tuple[str, str], FormatRow] = {}
    for r in big:      # each format once, at its largest ratio over the models measured
        key = (r.framework, r.format)
        if key not in worst or (r.framework_vs_dd or 0) > (worst[key].framework_vs_dd or 0):
            worst[key] = r
    ranked = sorted(worst.values(), key=lambda r: -(r.framework_vs_dd or 0.0))
    slow = [r for r in ranked if (r.framework_vs_dd or 0.0) >= factor]

    def name(r: FormatRow) -> str:
        return (f"{r.framework} {r.format} {r.framework_vs_dd:.1f}× at {r.model} "
                f"({PHASE_LABELS[r.bottleneck]})")
    if slow:
        fast = [r for r in ranked if (r.framework_vs_dd or 0.0) < factor]
        rest = (f"; within {factor:g}×: {', '.join(name(r) for r in fast)}" if fast else "")
        return Verdict(claim, "supported", f"{len(slow)} of {len(ranked)} formats: "
                       f"{', '.join(name(r) for r in slow)}{rest}", rule)
    return Verdict(claim, "contradicted", f"all {len(ranked)} formats within {factor:g}× of "
                   f"dd; slowest {name(ranked[0])}", rule)


SCALING_CLAIM = ("One writer bounds a checkpoint: sharding the save over N writer processes "
                 "shortens it")


def scaling_claims(scaling: Sequence[ScalingRow], min_speedup: float = MIN_SPEEDUP,
                   scope: str = "") -> tuple[Verdict, ...]:
    """The sharding claim judged per framework, on the speed-up's interval at the fewest
    writers measured beyond one (each has a core of its own there)."""
    rule = (f"sharded durable save at the fewest writers beyond one, Hodges–Lehmann speed-up "
            f"over one writer with its Moses interval: supported if the interval lies at or "
            f"above {min_speedup:g}, contradicted if at or below 1, undecided otherwise or "
            "with too few repetitions for the interval's confidence")
    sharded = [r for r in scaling if r.mode == "sharded" and r.writers > 1 and r.speedup]
    if not sharded:
        return (Verdict(SCALING_CLAIM, "undecided", "no sharded save with more than one "
                        "writer was measured", rule, scope),)
    out = []
    for fw in dict.fromkeys(r.framework for r in sharded):
        mine = sorted((r for r in sharded if r.framework == fw), key=lambda r: r.writers)
        first = mine[0]
        every = ", ".join(f"{r.writers}: {_speedup(r)}" for r in mine)
        evidence = f"{first.writers} writers: {_speedup(first)}; by writers — {every}"
        low, high = first.speedup_low or 0.0, first.speedup_high or math.inf
        if (first.speedup_confidence or 0.0) < CONFIDENCE - 1e-9:
            verdict = "undecided"
            evidence += (f" ({first.repeats} repetitions: too few for a "
                         f"{100 * CONFIDENCE:.0f}% interval)")
        elif low >= min_speedup:
            verdict = "supported"
        elif high <= 1.0:
            verdict = "contradicted"
        else:
            verdict = "undecided"
        out.append(Verdict(SCALING_CLAIM, cast(Outcome, verdict), evidence, rule,
                           f"{fw}; {scope}" if scope else fw))
    return tuple(out)


def _speedup(r: ScalingRow) -> str:
    if r.speedup_low is None or r.speedup_high is None:
        return f"{r.speedup:.2f}×"
    return f"{r.speedup:.2f}× [{r.speedup_low:.2f}, {r.speedup_high:.2f}]"


# -- advice ------------------------------------------------------------------------------

def _format_advice(found: Sequence[FrameworkFinding]) -> list[str]:
    out = []
    for f in (f for f in found if f.ckpt_bytes >= REAL_SIZE_BYTES):
        if f.fastest_format != f.slowest_format:
            out.append(f"{f.framework}: save with {f.fastest_format} "
                       f"({_t(f.fastest_durable_s)} durable for {format_bytes(f.ckpt_bytes)}); "
                       f"{f.slowest_format} takes "
                       f"{f.slowest_durable_s / f.fastest_durable_s:.1f}× as long.")
        if f.main_bottleneck == "serialise_s":
            out.append(f"{f.framework}: {f.main_format} is bound by its serialisation "
                       f"({100 * f.main_serialise_share:.0f}% of the durable save): snapshot "
                       "the state and write it in the background, or shard it over ranks.")
        elif f.main_bottleneck == "checksum_s":
            out.append(f"{f.framework}: {f.main_format} itself is fast; the atomic store's "
                       "SHA-256 of the files is the largest phase of its durable save: hash "
                       "the bytes while they are written, or use a faster hash.")
        elif f.main_bottleneck == "flush_s":
            out.append(f"{f.framework}: {f.main_format} waits on the disk (fsync): a faster "
                       "tier (node-local, burst buffer) or more writers on more nodes helps.")
    return out


def _compression_advice(rows: Sequence[FormatRow]) -> list[str]:
    out = []
    for fw in FRAMEWORKS:
        rs = [r for r in largest_rows(rows, fw) if r.ckpt_bytes >= REAL_SIZE_BYTES]
        plain = [r for r in rs if not r.compressed]
        if not plain:
            continue
        ref = min(plain, key=lambda r: r.durable_s)
        for r in (r for r in rs if r.compressed):
            saved = 1.0 - r.ckpt_bytes / ref.ckpt_bytes
            size = (f"saves {100 * saved:.1f}% of the bytes" if saved >= 0
                    else f"is {-100 * saved:.1f}% larger")
            out.append(f"{fw}: {r.format} {size} for {r.durable_s / ref.durable_s:.1f}× "
                       f"the time of {ref.format}; compress only where storage, not CPU "
                       "time, is scarce.")
    return out


def _scaling_advice(scaling: Sequence[ScalingRow], oracle: Sequence[OracleRow]) -> list[str]:
    out = []
    sharded = [r for r in scaling if r.mode == "sharded" and r.speedup]
    if sharded:
        best = max(sharded, key=lambda r: r.speedup or 0.0)
        out.append(f"On this machine the best sharded save was {best.writers} "
                   f"{best.framework} writers, {_speedup(best)} over one (95% interval; dd "
                   f"with {best.writers} writers: {best.dd_GBps:.2f} GB/s): one disk and two "
                   "cores leave little to share out; the gain of sharding is across nodes.")
    if oracle:
        top = max(r.gpus for r in oracle)
        pick = {(r.writers, r.serialise_source): r for r in oracle if r.gpus == top}
        single, shard = pick.get(("single", "profile")), pick.get(("dp-shard", "profile"))
        if single and shard:
            out.append(f"Predicted on {single.system} at {top} GPUs: one writer "
                       f"{_t(single.write_s)} ({PHASE_LABELS.get(single.bottleneck, single.bottleneck)}-"
                       f"bound, {100 * single.overhead_share:.2f}% of a "
                       f"{_t(single.interval_s)} interval), sharded {_t(shard.write_s)} "
                       f"({shard.bottleneck.removesuffix('_s')}-bound): shard when the "
                       "serialisation of one writer dominates.")
    return out


def advice(rows: Sequence[FormatRow], found: Sequence[FrameworkFinding],
           scaling: Sequence[ScalingRow], oracle: Sequence[OracleRow],
           restarts: Sequence[RestartRow]) -> tuple[str, ...]:
    out = _format_advice(found) + _compression_advice(rows) + _scaling_advice(scaling, oracle)
    changed = sorted({str(r.omit) for r in restarts if r.omit and not r.identical})
    if changed:
        out.append(f"Checkpoint the RNG states, the optimizer and the data position: a "
                   f"restore without {', '.join(changed)} gave a different run.")
    return tuple(out)
