"""Storage fit: checkpoint save and load time per framework and format.

A checkpoint of ``bytes`` on disk costs ``latency_s + bytes / bandwidth``: the latency
is what every checkpoint of that format pays whatever its size — creating and
opening its files, the fsyncs, the manifest and the rename of an atomic commit,
framework bookkeeping — and the bandwidth is the rate of serialising and writing
(reading and deserialising on load) the bytes. Both are fitted per (framework,
format) by relative least squares over checkpoints of several sizes; the per-file
latency is the latency over the format's file count. The bytes on disk of a new model
size follow ``overhead_bytes + ratio · state_bytes`` (state: the oracle's
format-free payload), fitted the same way.

**What is measured**: the fastest of the repetitions where the record has it (page
cache and other users of a shared disk only ever add time), else the median.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from testbed.calibration.metrics import relative_nnls, residuals, sig
from testbed.measurements import Checkpoint
from testbed.systems.calibrated import StorageFit

#: Fewest checkpoint sizes that separate the latency from the bandwidth.
MIN_SIZES = 2


def _line(x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(intercept, slope) of ``t ≈ a + b·x``, both ≥ 0, relative least squares."""
    a, b = relative_nnls(np.stack([np.ones_like(x), x], axis=1), t)
    return float(a), float(b)


def measured_save_s(rec: Checkpoint) -> float:
    m = rec.metrics
    return m.save_min_s if m.save_min_s is not None else m.save_s


def measured_load_s(rec: Checkpoint) -> float | None:
    m = rec.metrics
    return m.load_min_s if m.load_min_s is not None else m.load_s


def save_time_s(fit: StorageFit, ckpt_bytes: float) -> float:
    return fit.save_latency_s + ckpt_bytes / (fit.write_GBps * 1e9)


def load_time_s(fit: StorageFit, ckpt_bytes: float) -> float | None:
    if fit.load_latency_s is None or fit.read_GBps is None:
        return None
    return fit.load_latency_s + ckpt_bytes / (fit.read_GBps * 1e9)


def bytes_on_disk(fit: StorageFit, state_bytes: float) -> float:
    """Bytes a checkpoint of this format takes for a training state of ``state_bytes``."""
    return fit.overhead_bytes + fit.bytes_per_state_byte * state_bytes


def fit_storage(records: list[Checkpoint]) -> tuple[StorageFit, ...]:
    groups: dict[tuple[str, str], list[Checkpoint]] = defaultdict(list)
    for rec in records:
        groups[(rec.framework, rec.format)].append(rec)
    out = []
    for (framework, fmt), recs in sorted(groups.items()):
        size = np.array([r.metrics.ckpt_bytes for r in recs], float)
        if len(set(size.tolist())) < MIN_SIZES:
            continue
        save = np.array([measured_save_s(r) for r in recs], float)
        a, b = _line(size, save)
        loads = [(s, measured_load_s(r)) for s, r in zip(size, recs, strict=True)
                 if measured_load_s(r) is not None]
        la = lb = None
        if len({s for s, _ in loads}) >= MIN_SIZES:
            la, lb = _line(np.array([s for s, _ in loads]), np.array([t for _, t in loads]))
        state = np.array([r.metrics.state_bytes for r in recs], float)
        over, ratio = _line(state, np.maximum(size, 1.0))
        fit = StorageFit(
            framework=framework, format=fmt, files=max(r.metrics.files for r in recs),
            save_latency_s=sig(a), write_GBps=sig(1.0 / max(b, 1e-15) / 1e9),
            load_latency_s=None if la is None else sig(la),
            read_GBps=None if lb is None else sig(1.0 / max(lb, 1e-15) / 1e9),
            overhead_bytes=sig(over), bytes_per_state_byte=sig(ratio),
            bytes_range=(int(size.min()), int(size.max())),
            residuals=residuals([0.0], [1.0]))
        pred = [save_time_s(fit, s) for s in size]
        out.append(fit.model_copy(update={"residuals": residuals(pred, save)}))
    return tuple(out)


def find_storage(fits: tuple[StorageFit, ...], framework: str, fmt: str) -> StorageFit | None:
    for f in fits:
        if (f.framework, f.format) == (framework, fmt):
            return f
    return None
