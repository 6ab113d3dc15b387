"""Exact expected wall times of the simulator's job under its failure semantics.

With exponential failures of rate λ while the job runs, a segment of L seconds that
restarts from its beginning after every failure, and a down period A after each failure
(i.i.d., whatever happens inside it), renewal theory gives

    E[T] = (e^{λL} − 1)·(1/λ + E[A]).

What remains is E[A]: the restart (detection, replacement, requeue, load) with its own
failures. While the job restarts only causes that are not job-induced strike (rate
speed·λ per node present), and every such failure starts the restart over with one more
empty slot; once all slots are filled again (after detection) the requeue and load run
with every node present. With k empty slots during detection (length d) the rate is
r_k = (N − k)·s/μ, so with e_k = e^{−r_k d}, a_k = (1 − e_k)/r_k and Y the expected
rest after detection (requeue + load of length R₂ at rate ρ = N·s/μ, a failure there
sending the restart back to k = 1):

    E_k = a_k + (1 − e_k)·E_{k+1} + e_k·Y,     Y = (1 − e^{−ρR₂})/ρ + (1 − e^{−ρR₂})·E₁,

a chain solved exactly (the tail beyond a negligible probability is dropped). A failure
while running empties a slot with the hardware share p of the cause mix (k = 1) and
leaves the job's nodes in place otherwise (k = 0). For a job-level MTBF the rate does
not depend on the nodes present: E[A] = (e^{λ_r R} − 1)/λ_r with R = d + R₂.

One node with a spare pool of zero waits for its own repair: after a hardware failure
the job has no node until the repair ends (R_p after the failure), so the detection and
the wait take max(d, R_p) without failures, then Y.
"""

from __future__ import annotations

import math

#: Drop the tail of the empty-slot chain once reaching it is this improbable.
TAIL_PROBABILITY = 1e-18


def _stage(rate_per_s: float, length_s: float) -> tuple[float, float]:
    """(probability of no failure, expected time spent) of an exposed stage."""
    if rate_per_s <= 0 or length_s <= 0:
        return 1.0, length_s
    survive = math.exp(-rate_per_s * length_s)
    return survive, -math.expm1(-rate_per_s * length_s) / rate_per_s


def expected_down_nodes_s(nodes: int, node_mtbf_s: float, speed: float, hw_share: float,
                          detect_s: float, rest_s: float, repair_s: float | None = None
                          ) -> float:
    """E[A] for N identical exponential nodes (node MTBF μ, restart clock speed ``speed``,
    hardware share ``hw_share``). ``repair_s`` given: one node, no spare, its repair
    takes that long (see the module docstring)."""
    e_y, b = _stage(nodes * speed / node_mtbf_s, rest_s)
    if repair_s is not None:
        if nodes != 1:
            raise ValueError("the waiting-for-repair form is for one node")
        alpha, beta = max(detect_s, repair_s), 1.0
    else:
        alpha, beta, reach = 0.0, 0.0, 1.0
        for k in range(1, nodes + 1):
            e_k, a_k = _stage((nodes - k) * speed / node_mtbf_s, detect_s)
            alpha += reach * a_k
            beta += reach * e_k
            reach *= 1.0 - e_k
            if reach < TAIL_PROBABILITY:
                break
    # E1 = alpha + beta·Y and Y = b + (1 − e_y)·E1
    y = (b + (1.0 - e_y) * alpha) / (1.0 - (1.0 - e_y) * beta)
    e1 = alpha + beta * y
    e_0, a_0 = _stage(nodes * speed / node_mtbf_s, detect_s)
    e0 = a_0 + (1.0 - e_0) * e1 + e_0 * y
    return hw_share * e1 + (1.0 - hw_share) * e0


def expected_down_job_s(mtbf_s: float, speed: float, restart_s: float) -> float:
    """E[A] for a job-level MTBF: a restart of ``restart_s`` at rate speed/M, restarted
    by every failure."""
    rate = speed / mtbf_s
    if rate <= 0:
        return restart_s
    if rate * restart_s > 700:
        return math.inf
    return math.expm1(rate * restart_s) / rate


def segments_expected_s(lengths_s: list[float], mtbf_s: float, down_s: float) -> float:
    """Σ (e^{L/M} − 1)·(M + E[A]) over segments that each restart from their start."""
    total = 0.0
    for length in lengths_s:
        if length / mtbf_s > 700:
            return math.inf
        total += math.expm1(length / mtbf_s) * (mtbf_s + down_s)
    return total


def no_loss_expected_s(failure_free_s: float, mtbf_s: float, down_s: float) -> float:
    """A job that loses no work: the failure-free time plus E[A] per expected failure
    (FF/M of them while it runs): FF·(1 + E[A]/M); its ETTR is 1/(1 + E[A]/M) when FF is
    all compute."""
    return failure_free_s * (1.0 + down_s / mtbf_s)
