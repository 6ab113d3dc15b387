"""Typed results of the checkpoint study: one row per measurement, and the study.

Times are seconds, sizes bytes, rates GB/s (10⁹ bytes a second). Where a row compares
a save with ``dd`` it uses the fastest repetition of each (other users of a shared
machine and the page cache only ever add time: the calibration's rule,
:mod:`testbed.calibration.storage`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from testbed.app.study.verdict import Verdict

#: A save's phases, in the order a blocking save runs them (see :class:`FormatRow`).
SAVE_PHASES = ("serialise_s", "page_cache_s", "flush_s", "checksum_s")
PHASE_LABELS = {"serialise_s": "serialisation", "page_cache_s": "copy to page cache",
                "flush_s": "flush to disk (fsync)", "checksum_s": "checksum (SHA-256)",
                "device_to_host_s": "device-to-host",
                # the oracle's terms (testbed.resilience.ckpt_cost.CheckpointCost)
                "serialize_s": "serialisation", "transfer_s": "transfer to storage",
                "metadata_s": "file creates", "fsync_s": "fsync"}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


@dataclass(frozen=True)
class FormatRow:
    """One framework × model × format, measured (``real_runs.ckpt_study.bench``).

    The durable save is the save plus the atomic store's commit (``commit_s``; inside
    ``save_s`` for the harness format). Its phases: ``page_cache_s`` — what ``dd``
    takes to put the same bytes into the page cache; ``serialise_s`` — the rest of the
    save (the framework's own work); ``checksum_s`` — SHA-256 of the files;
    ``flush_s`` — the commit without the checksum (fsyncs, manifest, rename). On a CPU
    there is no device-to-host copy (``device_to_host_s`` is 0). The harness format
    commits inside its save, so there ``flush_s`` is what ``dd`` adds with ``conv=fsync``
    for the same bytes and ``serialise_s`` the rest. ``framework_durable_s`` leaves the
    store's checksum out: what the framework's save costs once it is on the disk, the
    figure held against ``dd … conv=fsync`` (``framework_vs_dd``).

    The ``dd_*`` figures are the fastest ``dd`` of the same number of bytes seen anywhere
    in the study, within :data:`POOL_TOLERANCE` of this row's size, scaled to its bytes
    (:func:`pool_dd`): on a shared machine one ``dd`` run can be slowed by others, and
    the bound is what the storage can do.
    """

    framework: str
    model: str
    format: str
    parameters: int
    tensors: int
    state_bytes: int
    ckpt_bytes: int
    files: int
    includes_optimizer: bool
    compressed: bool
    repeats: int
    save_s: float
    save_min_s: float
    commit_s: float | None
    sha256_s: float
    load_s: float
    load_min_s: float
    dd_write_s: float
    dd_fsync_s: float
    dd_read_s: float
    commit_in_save: bool = False
    dd_runs: int = 1                 # dd runs the bound is the fastest of (pool_dd)
    overhead_ratio: float = 0.0
    durable_s: float = 0.0
    serialise_s: float = 0.0
    page_cache_s: float = 0.0
    flush_s: float = 0.0
    checksum_s: float = 0.0
    device_to_host_s: float = 0.0
    framework_durable_s: float = 0.0
    save_vs_dd: float | None = None
    durable_vs_dd: float | None = None
    framework_vs_dd: float | None = None
    load_vs_dd: float | None = None
    save_GBps: float | None = None
    bottleneck: str = ""

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> FormatRow:
        names = {f for f in cls.__dataclass_fields__ if f not in _DERIVED}
        base: dict[str, Any] = {k: rec[k] for k in names if k in rec}
        commit = rec.get("commit_s")
        save = float(rec["save_min_s"])
        durable = save + (commit or 0.0)
        sha = float(rec["sha256_s"])
        page = min(float(rec["dd_write_s"]), save)
        phases = {"serialise_s": max(0.0, save - page), "page_cache_s": page,
                  "checksum_s": sha, "flush_s": max(0.0, (commit or 0.0) - sha)}
        if commit is None:   # the harness commits inside its save: its flush is dd's
            phases["flush_s"] = max(0.0, float(rec["dd_fsync_s"]) - page)
            phases["serialise_s"] = max(0.0, save - page - sha - phases["flush_s"])
        derived: dict[str, Any] = {
            **phases, "overhead_ratio": rec["ckpt_bytes"] / rec["state_bytes"] - 1.0,
            "durable_s": durable, "framework_durable_s": durable - sha,
            "save_vs_dd": _ratio(save, rec["dd_write_s"]),
            "durable_vs_dd": _ratio(durable, rec["dd_fsync_s"]),
            "framework_vs_dd": _ratio(durable - sha, rec["dd_fsync_s"]),
            "load_vs_dd": _ratio(rec["load_min_s"], rec["dd_read_s"]),
            "save_GBps": _ratio(rec["ckpt_bytes"] / 1e9, save),
            "bottleneck": max(phases, key=lambda k: phases[k])}
        return cls(**base, **derived)

    def to_dict(self) -> dict:
        return asdict(self)


_DERIVED = ("overhead_ratio", "durable_s", "serialise_s", "page_cache_s", "flush_s",
            "checksum_s", "device_to_host_s", "framework_durable_s", "save_vs_dd",
            "durable_vs_dd", "framework_vs_dd", "load_vs_dd", "save_GBps", "bottleneck")


#: Checkpoints whose sizes differ by at most this share pool their dd runs.
POOL_TOLERANCE = 0.05
DD_KEYS = ("dd_write_s", "dd_fsync_s", "dd_read_s")


def pool_dd(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each record with its dd times replaced by the fastest dd of every record of
    about its size (within :data:`POOL_TOLERANCE`), scaled to its bytes; the record's
    own run is one of them."""
    out = []
    for rec in records:
        size = rec["ckpt_bytes"]
        peers = [r for r in records if abs(r["ckpt_bytes"] / size - 1.0) <= POOL_TOLERANCE]
        best = {k: min(r[k] * size / r["ckpt_bytes"] for r in peers) for k in DD_KEYS}
        out.append({**rec, **best, "dd_runs": len(peers) * rec.get("repeats", 1)})
    return out


@dataclass(frozen=True)
class ScalingRow:
    """N writer processes saving at once (``real_runs.ckpt_study.writers``).

    ``speedup`` is the one-writer durable time over this one — the Hodges–Lehmann ratio
    of the repetitions, with its Moses interval ``speedup_low``…``speedup_high`` at
    ``speedup_confidence`` (:mod:`testbed.app.study.ckpt_stats`) — and ``efficiency`` the
    speed-up per writer. For ``all``, where every writer saves the whole state, both are
    of the aggregate rate (N × the time ratio)."""

    framework: str
    model: str
    mode: str
    writers: int
    repeats: int
    bytes_total: int
    bytes_per_writer: int
    wall_s: float
    wall_min_s: float
    durable_s: float
    durable_min_s: float
    writer_save_s: float
    dd_durable_s: float
    durable_runs_s: tuple[float, ...] = ()
    aggregate_GBps: float = 0.0
    dd_GBps: float = 0.0
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_confidence: float | None = None
    efficiency: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class OracleRow:
    """The oracle's checkpoint of a data-parallel job beyond this machine
    (:func:`testbed.resilience.ckpt_cost.checkpoint_cost` through
    :func:`testbed.oracle.estimate`): every term, and the share of a checkpoint
    interval a blocking save costs."""

    system: str
    model: str
    gpus: int
    nodes: int
    writers: str
    serialise_source: str          # "profile" or the framework whose rate was measured
    serialize_GBps: float
    state_bytes: int
    writer_count: int
    write_s: float
    read_s: float
    device_to_host_s: float
    serialize_s: float
    transfer_s: float
    metadata_s: float
    fsync_s: float
    bottleneck: str
    iteration_s: float | None
    interval_s: float
    overhead_share: float          # write_s / (interval_s + write_s)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RestartRow:
    """Straight-through vs checkpoint at ``k`` + restore in a new process."""

    framework: str
    model: str
    seed: int
    steps: int
    k: int
    omit: str | None
    loaded_step: int
    straight_sha256: str
    restored_sha256: str
    losses_equal: bool
    params_equal: bool
    parameters: int
    server_pid: int
    restore_pid: int
    new_process: bool
    fresh_interpreter: bool
    first_half_step: int = 0

    @property
    def identical(self) -> bool:
        return self.losses_equal and self.params_equal

    def to_dict(self) -> dict:
        return {**asdict(self), "identical": self.identical}


@dataclass(frozen=True)
class FrameworkFinding:
    """Where one framework's checkpoint time goes, at the largest model measured."""

    framework: str
    model: str
    ckpt_bytes: int
    fastest_format: str
    fastest_durable_s: float
    slowest_format: str
    slowest_durable_s: float
    main_format: str
    main_bottleneck: str
    main_durable_vs_dd: float | None
    main_serialise_share: float
    fastest_load_format: str
    fastest_load_s: float
    text: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CheckpointStudy:
    """The whole checkpoint study."""

    quick: bool
    ckpt_dir: str
    environment: dict
    formats: tuple[FormatRow, ...]
    scaling: tuple[ScalingRow, ...]
    oracle: tuple[OracleRow, ...]
    restarts: tuple[RestartRow, ...]
    findings: tuple[FrameworkFinding, ...]
    claims: tuple[Verdict, ...]
    advice: tuple[str, ...]
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"study": "checkpoint", "quick": self.quick, "ckpt_dir": self.ckpt_dir,
                "environment": self.environment, "settings": self.settings,
                "formats": [r.to_dict() for r in self.formats],
                "scaling": [r.to_dict() for r in self.scaling],
                "oracle": [r.to_dict() for r in self.oracle],
                "restarts": [r.to_dict() for r in self.restarts],
                "findings": [f.to_dict() for f in self.findings],
                "claims": [c.to_dict() for c in self.claims], "advice": list(self.advice)}
