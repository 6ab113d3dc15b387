"""The checkpoint study's tables for people: (headers, rows) of strings, one per part.

Durations with their unit (``format_duration``), sizes in MB (10⁶ bytes, as storage is
sold) or with binary prefixes where noted, ratios with one decimal.
"""

from __future__ import annotations

from collections.abc import Sequence

from testbed.app.study.ckpt_oracle import WRITERS
from testbed.app.study.ckpt_results import PHASE_LABELS, CheckpointStudy
from testbed.units import format_duration

#: (headers, rows, alignment: one 'l' or 'r' per column)
Table = tuple[list[str], list[list[str]], str]


def _t(seconds: float | None) -> str:
    return "—" if seconds is None else format_duration(seconds)


def _x(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.1f}×"


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.3f}" if nbytes < 1e7 else f"{nbytes / 1e6:.1f}"


def formats_table(study: CheckpointStudy) -> Table:
    headers = ["framework", "model", "format", "MB", "+bytes", "save", "commit", "durable",
               "dd fsync", "×dd", "load", "×dd read", "largest phase"]
    rows = [[r.framework, r.model, r.format, _mb(r.ckpt_bytes), f"{100 * r.overhead_ratio:+.1f}%",
             _t(r.save_min_s), "in save" if r.commit_in_save else _t(r.commit_s),
             _t(r.durable_s), _t(r.dd_fsync_s), _x(r.framework_vs_dd), _t(r.load_min_s),
             _x(r.load_vs_dd), PHASE_LABELS[r.bottleneck]]
            for r in study.formats]
    return headers, rows, "lll" + "r" * 9 + "l"


#: What the formats table's columns mean (printed under it).
FORMATS_NOTE = ("save: the format's own call (page cache); commit: the atomic store's fsync, "
                "SHA-256, manifest and rename; durable = save + commit; ×dd: (durable − "
                "SHA-256) over the fastest dd conv=fsync of as many bytes; load from the page "
                "cache over dd's read; +bytes: beyond the 8 bytes a parameter of weights and "
                "momentum")


def _interval(r) -> str:
    if r.writers == 1 or r.speedup_low is None:
        return _x(r.speedup)
    return f"{r.speedup:.2f}× [{r.speedup_low:.2f}, {r.speedup_high:.2f}]"


def scaling_table(study: CheckpointStudy) -> Table:
    headers = ["framework", "mode", "writers", "MB/writer", "page cache", "durable",
               "speed-up [95% CI]", "GB/s", "dd GB/s"]
    rows = [[r.framework, r.mode, str(r.writers), _mb(r.bytes_per_writer), _t(r.wall_min_s),
             _t(r.durable_min_s), _interval(r), f"{r.aggregate_GBps:.2f}", f"{r.dd_GBps:.2f}"]
            for r in study.scaling]
    return headers, rows, "ll" + "r" * 7


def oracle_table(study: CheckpointStudy) -> Table:
    """GPUs down, writers × serialisation source across (write seconds), the profile's
    single-writer bottleneck and share of the interval."""
    sources = list(dict.fromkeys(r.serialise_source for r in study.oracle))
    cell = {(r.gpus, r.writers, r.serialise_source): r for r in study.oracle}
    gpus = sorted({r.gpus for r in study.oracle})
    headers = ["GPUs", "nodes"] + [f"{w} ({s})" for w in WRITERS for s in sources]
    headers += ["single: bound", "single: share"]
    rows = []
    for g in gpus:
        ref = cell.get((g, "single", "profile"))
        row = [str(g), str(ref.nodes if ref else "")]
        row += [_t(cell[(g, w, s)].write_s) if (g, w, s) in cell else "—"
                for w in WRITERS for s in sources]
        row += [PHASE_LABELS.get(ref.bottleneck, ref.bottleneck) if ref else "—",
                f"{100 * ref.overhead_share:.3f}%" if ref else "—"]
        rows.append(row)
    return headers, rows, "r" * (len(headers) - 2) + "lr"


def restart_table(study: CheckpointStudy) -> Table:
    headers = ["framework", "model", "seed", "steps", "k", "restored", "new pid", "params sha256",
               "restored sha256", "losses", "identical"]
    rows = [[r.framework, r.model, str(r.seed), str(r.steps), str(r.k),
             "all state" if r.omit is None else f"without {r.omit}", str(r.restore_pid),
             r.straight_sha256[:12], r.restored_sha256[:12],
             "equal" if r.losses_equal else "differ", "yes" if r.identical else "no"]
            for r in study.restarts]
    return headers, rows, "ll" + "r" * 3 + "lrll" + "ll"


def verdict_lines(claims: Sequence) -> list[str]:
    out = []
    for c in claims:
        scope = f" [{c.scope}]" if c.scope else ""
        out += [f"{c.verdict.upper():<12} {c.claim}{scope}", f"{'':<12} evidence: {c.evidence}",
                f"{'':<12} rule: {c.rule}"]
    return out
