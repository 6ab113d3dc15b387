"""Calibrated profiles: loading them (with their fitted section) and writing them.

A calibrated profile is an ordinary system profile (:mod:`testbed.systems.profile`) whose
``calibration`` block also holds ``records_fit`` (:class:`RecordsFit`, a typed field
of :class:`~testbed.systems.profile.Calibration`), so it loads everywhere a profile loads
(``testbed oracle``, a scenario's ``system:``, ``testbed verify``);
:func:`load_calibrated` returns the fitted section alongside.

:func:`profile_yaml` renders a profile's data as YAML deterministically (keys in the
order the data holds them), which is what makes a refit byte-identical.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.errors import ScenarioError
from testbed.io.read import load_yaml
from testbed.io.schema import validate
from testbed.systems.calibrated import RecordsFit
from testbed.systems.profile import SystemProfile, load_system, profile_path

#: Key of the fitted section inside ``calibration``.
SECTION = "records_fit"
#: First line of a written profile.
HEADER = ("# System profile calibrated by `testbed calibrate RECORDS... --base PROFILE`:\n"
          "# the base profile with fitted values; calibration.records_fit says from what.\n")


@dataclass(frozen=True)
class CalibratedProfile:
    """A loaded profile: the validated profile, its fitted section, and its plain data."""

    path: str
    system: SystemProfile
    fit: RecordsFit | None
    data: dict[str, Any]


def validate_profile(data: Any, source: str, lines: dict[str, int] | None = None
                     ) -> tuple[SystemProfile, RecordsFit | None]:
    """Validate plain profile data; the profile and its fitted section (None if none)."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise ScenarioError("a system profile must be a mapping of keys to values",
                            source=source)
    if "source" in data:
        raise ScenarioError("unknown key 'source'", source=source, field="source",
                            line=lines.get("source"))
    cal = data.get("calibration")
    if isinstance(cal, dict) and SECTION in cal:     # the fitted section's errors first
        prefix = f"calibration.{SECTION}."
        sub = {k[len(prefix):]: v for k, v in lines.items() if k.startswith(prefix)}
        try:
            validate(RecordsFit, cal[SECTION], source=source, lines=sub, what=SECTION)
        except ScenarioError as exc:
            field = f"calibration.{SECTION}" + (f".{exc.field}" if exc.field else "")
            raise ScenarioError(exc.message, source=source, field=field, line=exc.line) from None
    system = validate(SystemProfile, {**copy.deepcopy(data), "source": source}, source=source,
                      lines=lines, what="system profile")
    return system, system.records_fit


def load_calibrated(name_or_path: str | Path) -> CalibratedProfile:
    """Load a profile by name (shipped) or path, with its fitted section if any."""
    path = str(profile_path(name_or_path))
    system = load_system(path)
    doc = load_yaml(path)
    return CalibratedProfile(path=path, system=system, fit=system.records_fit, data=doc.data)


def profile_yaml(data: dict[str, Any]) -> str:
    """The YAML text of a profile (header, then the data in its own key order)."""
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100,
                          allow_unicode=True)
    return HEADER + body
