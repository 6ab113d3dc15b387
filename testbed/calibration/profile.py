"""Calibrated profiles: loading them (with their fitted section) and writing them.

A calibrated profile is an ordinary system profile (:mod:`testbed.systems`) whose
``calibration`` block also holds ``records_fit`` (:class:`RecordsFit`). Until
``Calibration`` declares that field, :func:`load_calibrated` validates the section
itself and the rest of the profile with :class:`~testbed.systems.SystemProfile`, so
both old and new profiles load the same way.

:func:`profile_yaml` renders a profile's data as YAML deterministically (keys in the
order the data holds them), which is what makes a refit byte-identical.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.calibration.section import RecordsFit
from testbed.errors import ScenarioError
from testbed.inputs import load_yaml
from testbed.schema import validate
from testbed.systems import Calibration, SystemProfile, profile_path

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


def _system_knows_section() -> bool:
    return SECTION in Calibration.model_fields


def validate_profile(data: Any, source: str, lines: dict[str, int] | None = None
                     ) -> tuple[SystemProfile, RecordsFit | None]:
    """Validate plain profile data (the fitted section on its own when the profile
    schema does not declare it yet)."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise ScenarioError("a system profile must be a mapping of keys to values",
                            source=source)
    if "source" in data:
        raise ScenarioError("unknown key 'source'", source=source, field="source",
                            line=lines.get("source"))
    body = copy.deepcopy(data)
    fit = None
    cal = body.get("calibration")
    if isinstance(cal, dict) and SECTION in cal:
        raw = cal[SECTION] if _system_knows_section() else cal.pop(SECTION)
        prefix = f"calibration.{SECTION}."
        sub = {k[len(prefix):]: v for k, v in lines.items() if k.startswith(prefix)}
        try:
            fit = validate(RecordsFit, raw, source=source, lines=sub, what=SECTION)
        except ScenarioError as exc:
            field = f"calibration.{SECTION}" + (f".{exc.field}" if exc.field else "")
            raise ScenarioError(exc.message, source=source, field=field, line=exc.line) from None
        if not cal:
            body["calibration"] = None
    system = validate(SystemProfile, {**body, "source": source}, source=source, lines=lines,
                      what="system profile")
    return system, fit


def load_calibrated(name_or_path: str | Path) -> CalibratedProfile:
    """Load a profile by name (shipped) or path, with its fitted section if any."""
    path = str(profile_path(name_or_path))
    doc = load_yaml(path)
    system, fit = validate_profile(doc.data, path, doc.lines)
    return CalibratedProfile(path=path, system=system, fit=fit, data=doc.data)


def profile_yaml(data: dict[str, Any]) -> str:
    """The YAML text of a profile (header, then the data in its own key order)."""
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100,
                          allow_unicode=True)
    return HEADER + body
