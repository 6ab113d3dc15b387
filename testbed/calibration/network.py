"""Network fit: α and β per tier, backend and collective from micro-benchmarks.

For each (collective, backend, process count, node count) the measured times over
message sizes are fitted by ``t = a + m·b`` (relative least squares, ``a, b ≥ 0``;
Hockney's model), then read as the α–β of the algorithm that library runs there —
rings for gloo and MPI at these sizes (Thakur, Rabenseifner & Gropp 2005), the
oracle's formulas (:mod:`testbed.oracle.collectives`, m = bytes per rank):

* all-reduce: ``2(n−1)·α + 2(n−1)/n · m·β``;
* all-gather (each rank contributes m): ``(n−1)·α + (n−1) · m·β``;
* reduce-scatter (each rank holds m): ``(n−1)·α + (n−1)/n · m·β``;
* broadcast (pipelined): ``α + m·β``.

The tier is the profile's smallest tier spanning the ``n`` processes (placed on
consecutive devices), as the oracle picks it.

**What is measured**: the fastest repetition (``min_time_s``) where the record has it.
Every repetition starts after a barrier, so the minimum is the collective itself; on a
shared machine the median also holds the time slices other users' processes take
(which is the load, not the network) — the same reason the compute fit reads CPU time.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from testbed.calibration.metrics import relative_nnls, residuals, sig
from testbed.measurements import Collective
from testbed.systems.calibrated import AlphaBeta

#: (latency steps, bandwidth factor) of each collective's ring as functions of n.
_RING = {
    "allreduce": (lambda n: 2 * (n - 1), lambda n: 2 * (n - 1) / n),
    "allgather": (lambda n: n - 1, lambda n: n - 1),
    "reduce_scatter": (lambda n: n - 1, lambda n: (n - 1) / n),
    "broadcast": (lambda n: 1, lambda n: 1),
}
#: Fewest message sizes that separate latency from bandwidth.
MIN_SIZES = 3


def measured_time_s(rec: Collective) -> float:
    """The time a fit and a verification use (see the module doc)."""
    return rec.metrics.min_time_s if rec.metrics.min_time_s is not None else rec.metrics.time_s


def tier_for(spans: list[tuple[str, int]], processes: int, nodes: int = 1,
             gpus_per_node: int = 1) -> str:
    """Name of the smallest tier whose span covers ``processes`` devices (more than one
    node's devices when the processes span several nodes)."""
    need = max(processes, gpus_per_node + 1) if nodes > 1 else processes
    for name, span in spans:
        if need <= span:
            return name
    return spans[-1][0]


def collective_time_s(ab: AlphaBeta, message_bytes: float, processes: int | None = None) -> float:
    """Time of the fitted collective for ``message_bytes`` per rank (at ``processes``
    ranks, default the fitted count) from its α–β."""
    n = processes or ab.processes
    steps, factor = _RING[ab.op]
    return steps(n) * ab.latency_us * 1e-6 + factor(n) * message_bytes / (ab.bandwidth_GBps * 1e9)


def fit_network(records: list[Collective], spans: list[tuple[str, int]],
                gpus_per_node: int = 1) -> tuple[AlphaBeta, ...]:
    """One :class:`AlphaBeta` per (op, backend, processes, nodes) with enough sizes."""
    groups: dict[tuple[str, str, int, int], list[Collective]] = defaultdict(list)
    for rec in records:
        groups[(rec.op, rec.backend, rec.processes, rec.nodes)].append(rec)
    out = []
    for (op, backend, n, nodes), recs in sorted(groups.items()):
        sizes = np.array([r.metrics.message_bytes for r in recs], float)
        if len(set(sizes.tolist())) < MIN_SIZES:
            continue
        t = np.array([measured_time_s(r) for r in recs], float)
        a, b = relative_nnls(np.stack([np.ones_like(sizes), sizes], axis=1), t)
        steps, factor = _RING[op]
        alpha_s = a / steps(n)
        beta = b / factor(n)
        bandwidth = 1.0 / beta if beta > 0 else 1e12
        ab = AlphaBeta(op=op, backend=backend, processes=n,
                       tier=tier_for(spans, n, nodes, gpus_per_node), nodes=nodes,
                       latency_us=sig(alpha_s * 1e6), bandwidth_GBps=sig(bandwidth / 1e9),
                       message_bytes=(int(sizes.min()), int(sizes.max())),
                       residuals=residuals([0.0], [1.0]))
        pred = [collective_time_s(ab, s) for s in sizes]
        out.append(ab.model_copy(update={"residuals": residuals(pred, t)}))
    return tuple(out)


def find_collective(fits: tuple[AlphaBeta, ...], op: str, backend: str,
                    processes: int) -> AlphaBeta | None:
    """The fit of ``op`` on ``backend`` at ``processes`` ranks, else the same op and
    backend at the nearest process count (α–β carry over; the formula scales them)."""
    same = [f for f in fits if f.op == op and f.backend == backend]
    exact = [f for f in same if f.processes == processes]
    if exact:
        return exact[0]
    return min(same, key=lambda f: (abs(f.processes - processes), f.processes), default=None)
