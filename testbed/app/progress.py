"""Progress bars for long commands: points done, rate and time left, on stderr.

One small wrapper around tqdm so every command shows the same bar and turns it off
the same way: ``--quiet``, ``--json`` (stdout is for machines then), or a stderr
that is not a terminal unless the caller forces it (``TESTBED_PROGRESS=1``, used by
the tests). Progress is presentation only; it never touches results.
"""

from __future__ import annotations

import os
import sys


def wanted(quiet: bool = False, as_json: bool = False) -> bool:
    """Whether to show a bar: not with --quiet or --json; on a terminal or when forced."""
    if quiet or as_json:
        return False
    if os.environ.get("TESTBED_PROGRESS") == "1":
        return True
    return sys.stderr.isatty()


class Progress:
    """A progress bar (or nothing when disabled); ``update(n)`` and use as a context manager."""

    def __init__(self, total: int, *, unit: str = "point", desc: str | None = None,
                 enabled: bool = True, initial: int = 0) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit=unit, desc=desc, initial=initial,
                            file=sys.stderr, dynamic_ncols=True, smoothing=0.1,
                            mininterval=0.2)

    def update(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
