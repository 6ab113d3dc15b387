"""Waiting for the slowest GPU: the straggler cost of a synchronous step (issue 18).

Synchronous data-parallel training ends every step with a collective that no GPU can
finish before the last one arrives, so a step lasts as long as the slowest of its ``N``
GPUs (Chen et al., "Revisiting Distributed Synchronous SGD", 2016, who measured the
time to gather gradients from 50-100 workers growing with the workers and cut it with
backup workers). When one GPU's step time varies around its mean with standard
deviation ``σ`` (operating-system and host noise, input-pipeline hiccups, clock and
power management; the stack's ``step_jitter_us``), the expected maximum of ``N``
independent step times exceeds the mean by ``σ · z(N)``, ``z(N)`` the expected
maximum of ``N`` standard normal variables: 0 for one GPU, 1.03 for 4, 1.42 for 8,
2.34 for 64, 3.24 for 1,024 — growing like ``√(2 ln N)`` (Gumbel's limit). ``z`` is
Blom's approximation ``Φ⁻¹((N − 0.375)/(N + 0.25))`` (Blom 1958; against Harter's 1961
tables 4.5 % high at ``N = 2``, under 2 % from 4, under 1 % from 8 GPUs), so the wait
grows slowly but never stops growing with the GPUs.
"""

from __future__ import annotations

from statistics import NormalDist

_STD = NormalDist()
#: Blom's plotting-position constant for the expected maximum of normal samples.
BLOM_ALPHA = 0.375


def expected_max_std_normal(n: int) -> float:
    """Expected maximum of ``n`` independent standard normal variables (Blom)."""
    if n <= 1:
        return 0.0
    return _STD.inv_cdf((n - BLOM_ALPHA) / (n - 2 * BLOM_ALPHA + 1))


def sync_wait_s(jitter_s: float, gpus: int) -> float:
    """Seconds a synchronous step of ``gpus`` GPUs waits beyond the mean GPU's step when
    each GPU's step time has standard deviation ``jitter_s``."""
    if jitter_s <= 0:
        return 0.0
    return jitter_s * expected_max_std_normal(gpus)
