"""Where a scenario's references point, and where its errors are reported.

Every relative path in a scenario (``system:``, ``failures.trace``, ``failures.causes``,
``cluster.node_rates``, ``hpo.cost.table``, ``hpo.cost.trace``, ``hpo.objective``)
resolves against the scenario file's folder (:func:`relative_path`); a bare name
(``abci-v100``, ``llama3_405b``) is a shipped profile or table. :func:`at` completes an
input error raised while resolving a key with the scenario's file, line and key
(:func:`located`); :func:`scenario_errors` completes every error raised without a file
while a whole scenario resolves. This is the only module that knows either rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed.errors import Infeasible, InputError
from testbed.scenario.schema import Scenario


@contextmanager
def at(sc: Scenario, field: str) -> Iterator[None]:
    """Re-raise an input error from a referenced name or file at the scenario's key."""
    try:
        yield
    except Infeasible:
        raise
    except InputError as exc:
        if exc.source not in (None, sc.source):
            if exc.field is None and exc.line is None:   # the file as a whole (a FIFO, too
                exc.field = field                        # large): say which key named it
                exc.args = (exc.format(),)
            raise   # the error is inside another file (a trace, a cause table): keep it
        sub = exc.field if exc.field and exc.field != field.rsplit(".", 1)[-1] else None
        key = f"{field}.{sub}" if sub and field in ("model", "parallelism") else field
        raise located(sc, exc, key) from None


@contextmanager
def scenario_errors(sc: Scenario) -> Iterator[None]:
    """Complete an input error raised inside without a file (a unit parser's, a name
    lookup's, a policy's) with the scenario's file and the line of its key."""
    try:
        yield
    except Infeasible:
        raise
    except InputError as exc:
        if sc.source and exc.field and exc.source in (None, sc.source) and exc.line is None:
            raise located(sc, exc, exc.field) from None
        raise


def located(sc: Scenario, exc: InputError, field: str) -> InputError:
    """``exc`` at the scenario's file, the line of ``field`` and ``field``: a plain input
    error (a unit parser's, a name lookup's) becomes the scenario's
    :class:`~testbed.errors.ScenarioError`; a typed one (a job that cannot finish) keeps
    its type."""
    err = sc.error(exc.message, field)
    if type(exc) is InputError:
        return err
    exc.source, exc.field, exc.line = err.source, err.field, err.line
    exc.args = (exc.format(),)
    return exc


def scenario_dir(sc: Scenario) -> Path | None:
    """The folder relative paths of the scenario resolve against."""
    return Path(sc.source).parent if sc.source and not sc.source.startswith("<") else None


def relative_path(sc: Scenario, ref: str) -> Path:
    """A path written in the scenario, resolved against the scenario file's folder."""
    path = Path(ref)
    base = scenario_dir(sc)
    if path.is_absolute() or base is None:
        return path
    return base / path


def system_ref(sc: Scenario) -> str:
    """The scenario's ``system:`` as a profile name or a path resolved against its folder."""
    ref = sc.system or ""
    if "/" in ref or ref.endswith((".yaml", ".yml")):
        return str(relative_path(sc, ref))
    return ref
