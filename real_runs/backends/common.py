"""Helpers shared by the back ends: peak memory and layer timing."""

from __future__ import annotations

import resource
import sys


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (bytes; Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
