"""Where the testbed's own data files live: package data under ``testbed/data/``.

System profiles (``systems/``), failure-cause tables (``causes/``), the built-in
scenarios (``scenarios/``, the quickstart that ``testbed run`` runs by default) and
reference data sets ship inside the package and are found with
:mod:`importlib.resources`, so an installed wheel works outside the checkout. Users
refer to them by name (``--system abci-v100``, ``causes: llama3_405b``); a path to a
file of their own works wherever a name does.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: Sub-folders of ``testbed/data`` and the suffix of their files.
KINDS = {"systems": ".yaml", "causes": ".csv", "scenarios": ".yaml", "hurricanes": ".csv"}


def data_dir(kind: str) -> Path:
    """The folder of one kind of package data (a real folder: the package is installed
    unzipped, as pip always does)."""
    if kind not in KINDS:
        raise KeyError(kind)
    return Path(str(resources.files("testbed") / "data" / kind))


def names(kind: str) -> list[str]:
    """Names (file stems) of the shipped files of one kind, sorted."""
    folder = data_dir(kind)
    return sorted(p.stem for p in folder.glob(f"*{KINDS[kind]}") if p.is_file())


def named_file(kind: str, name: str) -> Path | None:
    """The shipped file called ``name`` of one kind, or None."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    path = data_dir(kind) / f"{name}{KINDS[kind]}"
    return path if path.is_file() else None
