"""Typed errors for input problems, so that the CLI can print one line and exit 2.

Every error that is the user's fault (a bad file, an unknown name, a value out of
range) derives from :class:`InputError`. Configurations that are well-formed but cannot
run (out of memory, more GPUs than filters) are not errors: the oracle returns them as
infeasible estimates with a reason, and :class:`Infeasible` carries that reason where an
exception is more convenient.
"""

from __future__ import annotations


class TestbedError(Exception):
    """Base class for every error the testbed raises on purpose."""

    __test__ = False  # keep pytest from collecting this as a test class


class InputError(TestbedError):
    """Bad user input: printed as one line, exit status 2, never a traceback.

    ``source`` names the file (or the CLI option) and ``field`` the key path inside it,
    so the message always says where the problem is.
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None,
                 line: int | None = None) -> None:
        self.message = message
        self.source = source
        self.field = field
        self.line = line
        super().__init__(self.format())

    def format(self) -> str:
        where = []
        if self.source:
            where.append(f"{self.source}:{self.line}" if self.line else self.source)
        if self.field:
            where.append(self.field)
        prefix = ": ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class ScenarioError(InputError):
    """A scenario, system profile or trace file is malformed or inconsistent."""


class UnknownNameError(InputError):
    """An unknown model, strategy, system, framework, policy, ... was asked for."""


class Infeasible(InputError):
    """A configuration that cannot run (memory, structural limits); ``reason`` says why.

    The oracle raises it internally and returns an infeasible estimate; a scenario whose
    configuration is infeasible raises it from the resolver with the file and key, and
    sweeps catch it by type to count and skip the point.
    """

    def __init__(self, reason: str, *, source: str | None = None, field: str | None = None,
                 line: int | None = None) -> None:
        self.reason = reason
        super().__init__(f"the oracle finds this configuration infeasible: {reason}",
                         source=source, field=field, line=line)


class RunawayError(InputError):
    """A scenario that would not finish in reasonable time (refused before simulating, or
    stopped by the per-replication cap); the message says why and which field to change."""
