"""Host-selection policies: which idle nodes host selection gives the job.

Built in: ``random`` (uniform), ``fewest_failures`` (fewest recorded failures first) and
``highest_score`` (highest retirement score first); ties go to the lowest node id. A
user's policy is any callable behind :class:`HostSelectionPolicy`, named in the
scenario as ``module:function`` (``cluster.host_selection``).

**Loading a user's policy imports code on purpose** — the one place the testbed does,
and only when the user asks for it on the command line (``testbed --allow-code …``, which
sets ``TESTBED_ALLOW_CODE=1`` for the command and its workers): a scenario file alone
never runs code, whoever wrote it. :func:`load_policy` checks the name's form, refuses
without that permission, imports the module with
:func:`importlib.import_module` (it must be importable: installed, or on ``PYTHONPATH``;
the scenario's folder is *not* added to the path) and checks that the attribute is
callable; every failure is one :class:`~testbed.errors.InputError` naming the field. The
policy then sees the whole idle pool at each host selection (O(pool) per selection,
which is rare: the built-ins are O(log N)).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from testbed.errors import InputError, UnknownNameError
from testbed.resilience.lifecycle import HOST_POLICIES
from testbed.units import did_you_mean

#: Set to "1" by ``testbed --allow-code``: the user permits importing a named policy.
ALLOW_CODE_ENV = "TESTBED_ALLOW_CODE"

_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class NodeRecord(NamedTuple):
    """What a host-selection policy may know of an idle node (what an operator sees)."""

    node: int
    failures: int          # recorded (diagnosed and attributed) failures
    score: float           # retirement score (initial score when none is configured)
    repairs: int           # completed repairs
    last_failure_s: float  # time of the last recorded failure (-inf: none)


class HostSelectionPolicy(Protocol):
    """``policy(candidates, count, rng) -> node ids``: choose ``count`` distinct nodes
    among ``candidates`` (the idle pool), drawing any randomness from ``rng``."""

    def __call__(self, candidates: Sequence[NodeRecord], count: int,
                 rng: np.random.Generator) -> Sequence[int]: ...


def load_policy(ref: str, *, source: str | None = None,
                field: str = "cluster.host_selection") -> Callable:
    """The callable named ``module:function`` (see the module docstring)."""
    if ":" not in ref:
        raise UnknownNameError(f"unknown host-selection policy {ref!r}"
                               f"{did_you_mean(ref, HOST_POLICIES)}; choose one of "
                               f"{', '.join(HOST_POLICIES)} or name a Python policy as "
                               "'module:function'", source=source, field=field)
    if not _REF.match(ref):
        raise InputError(f"{ref!r} is not a policy name of the form 'module:function'",
                         source=source, field=field)
    if os.environ.get(ALLOW_CODE_ENV) != "1":
        raise InputError(f"{ref!r} names Python code to import; a scenario never runs code "
                         f"on its own: run `testbed --allow-code …` (or set "
                         f"{ALLOW_CODE_ENV}=1) to use it", source=source, field=field)
    module_name, attr = ref.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"cannot import policy module {module_name!r}: {exc}",
                         source=source, field=field) from None
    except Exception as exc:   # the module itself raised while being imported
        raise InputError(f"importing policy module {module_name!r} failed: "
                         f"{type(exc).__name__}: {exc}", source=source, field=field) from None
    fn = getattr(module, attr, None)
    if fn is None:
        names = [n for n in dir(module) if not n.startswith("_")]
        raise InputError(f"module {module_name!r} has no {attr!r}{did_you_mean(attr, names)}",
                         source=source, field=field)
    if not callable(fn):
        raise InputError(f"{ref!r} is not callable", source=source, field=field)
    return fn


def checked_choice(chosen: Sequence[int], candidates: Sequence[NodeRecord], count: int,
                   ref: str) -> list[int]:
    """A user policy's answer, checked: ``count`` distinct ids among the candidates."""
    try:
        out = [int(n) for n in chosen]
    except (TypeError, ValueError):
        raise InputError(f"host-selection policy {ref!r} must return node ids, got "
                         f"{chosen!r}", field="cluster.host_selection") from None
    allowed = {c.node for c in candidates}
    if len(out) != count or len(set(out)) != count or not set(out) <= allowed:
        raise InputError(f"host-selection policy {ref!r} must return {count} distinct ids "
                         f"of idle nodes, got {out[:8]!r}", field="cluster.host_selection")
    return out
